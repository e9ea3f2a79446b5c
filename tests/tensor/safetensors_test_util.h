#pragma once
// Writes safetensors files from tests: any metadata, any tensor table (also tables no
// correct writer would produce), so the reader and the importer can be fed both.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace deferkv::safetensors_test {

struct RawTensor {
  std::string name;
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline RawTensor f32_tensor(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
  RawTensor t{name, "F32", std::move(shape), std::vector<uint8_t>(values.size() * sizeof(float))};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// The header's data_offsets follow the tensors' byte sizes in order; `cut` bytes are
// dropped from the end of the file (a truncated download).
inline void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                              const std::vector<RawTensor>& tensors, size_t cut = 0) {
  nlohmann::json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  const std::string text = header.dump();
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  file += text;
  for (const RawTensor& t : tensors) file.append(t.bytes.begin(), t.bytes.end());
  file.resize(file.size() - cut);
  std::ofstream(path, std::ios::binary) << file;
}

}  // namespace deferkv::safetensors_test
