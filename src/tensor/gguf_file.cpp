#include "tensor/gguf_file.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/utf8.h"
#include "deferkv/error.h"

namespace deferkv {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;
constexpr uint32_t kMaxArrayDepth = 4;
// Each array item becomes a GgufValue of 48 bytes, so a count the file can hold may still
// ask for far more memory than the file has bytes (a flipped bit in a UINT8 array's count
// in a multi-GB model). Real arrays (vocabularies, merges) stay far below this.
constexpr uint64_t kMaxArrayItems = uint64_t{1} << 24;

// A bounds-checked little-endian reader over the mapped bytes.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size)
      : path_(path), data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const char* what) {
    uint64_t length = read<uint64_t>(what);
    if (length > kMaxStringBytes) {
      fail("{}: {} has an absurd length {} at offset {}", path_, what, length, pos_ - 8);
    }
    need(length, what);
    std::string text(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return text;
  }

  void need(uint64_t bytes, const char* what) const {
    if (bytes > remaining()) {
      fail("{}: file is truncated: {} needs {} bytes at offset {}, but only {} remain", path_,
           what, bytes, pos_, remaining());
    }
  }

  const std::string& path() const { return path_; }

 private:
  const std::string& path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Smallest number of bytes one element of `type` takes in the file; used to reject
// array counts that cannot fit before allocating for them.
uint64_t min_element_bytes(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL: return 1;
    case GgufType::UINT16:
    case GgufType::INT16: return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32: return 4;
    case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 12;
    default: return 8;
  }
}

GgufType read_value_type(Cursor& in, const std::string& key) {
  uint32_t raw = in.read<uint32_t>("value type");
  if (raw > static_cast<uint32_t>(GgufType::FLOAT64)) {
    fail("{}: metadata '{}' has unknown value type {}", in.path(), key, raw);
  }
  return static_cast<GgufType>(raw);
}

GgufValue read_value(Cursor& in, GgufType type, const std::string& key, uint32_t depth) {
  switch (type) {
    case GgufType::UINT8: return {type, uint64_t{in.read<uint8_t>("UINT8 value")}};
    case GgufType::INT8: return {type, int64_t{in.read<int8_t>("INT8 value")}};
    case GgufType::UINT16: return {type, uint64_t{in.read<uint16_t>("UINT16 value")}};
    case GgufType::INT16: return {type, int64_t{in.read<int16_t>("INT16 value")}};
    case GgufType::UINT32: return {type, uint64_t{in.read<uint32_t>("UINT32 value")}};
    case GgufType::INT32: return {type, int64_t{in.read<int32_t>("INT32 value")}};
    case GgufType::UINT64: return {type, in.read<uint64_t>("UINT64 value")};
    case GgufType::INT64: return {type, in.read<int64_t>("INT64 value")};
    case GgufType::FLOAT32: return {type, double{in.read<float>("FLOAT32 value")}};
    case GgufType::FLOAT64: return {type, in.read<double>("FLOAT64 value")};
    case GgufType::BOOL: {
      uint8_t raw = in.read<uint8_t>("BOOL value");
      if (raw > 1) fail("{}: metadata '{}' has a BOOL value of {}", in.path(), key, raw);
      return {type, raw == 1};
    }
    case GgufType::STRING: return {type, in.read_string("string value")};
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth) {
        fail("{}: metadata '{}' nests arrays deeper than {}", in.path(), key, kMaxArrayDepth);
      }
      GgufType elem_type = read_value_type(in, key);
      uint64_t count = in.read<uint64_t>("array length");
      if (count > in.remaining() / min_element_bytes(elem_type)) {
        fail("{}: metadata '{}' claims {} array elements, more than the file can hold "
             "(corrupt or truncated file)",
             in.path(), key, count);
      }
      if (count > kMaxArrayItems) {
        fail("{}: metadata '{}' claims {} array elements, more than the {} deferkv accepts",
             in.path(), key, count, kMaxArrayItems);
      }
      std::vector<GgufValue> items;
      items.reserve(count);
      for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(in, elem_type, key, depth + 1));
      return GgufValue::of_array(elem_type, std::move(items));
    }
  }
  fail("{}: metadata '{}' has unknown value type", in.path(), key);
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

std::string GgufTensorInfo::shape_string() const {
  std::string text = "[";
  for (uint32_t d = 0; d < n_dims; ++d) text += fmt::format("{}{}", d ? ", " : "", ne[d]);
  return text + "]";
}

GgufFile::GgufFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
  parse();
}

void GgufFile::parse() {
  const std::string& p = file_->path();
  Cursor in(p, file_->data(), file_->size());

  if (in.remaining() < 4 || in.read<uint32_t>("magic") != kMagic) {
    fail("{}: not a GGUF file (the first 4 bytes are not 'GGUF')", p);
  }
  version_ = in.read<uint32_t>("version");
  if (version_ == 1) fail("{}: GGUF version 1 is obsolete; convert the file to version 3", p);
  if (version_ != 2 && version_ != 3) {
    fail("{}: unsupported GGUF version {} (supported: 2, 3{})", p, version_,
         (version_ & 0xFFFF) == 0 ? "; the file may be big-endian" : "");
  }
  uint64_t n_tensors = in.read<uint64_t>("tensor count");
  uint64_t n_kv = in.read<uint64_t>("metadata count");
  // Each metadata entry takes at least 12 bytes (key length + type), each tensor entry 24.
  if (n_kv > in.remaining() / 12) {
    fail("{}: absurd metadata count {} for the {} bytes left (corrupt or truncated file)", p, n_kv,
         in.remaining());
  }
  if (n_tensors > in.remaining() / 24) {
    fail("{}: absurd tensor count {} for the {} bytes left (corrupt or truncated file)", p,
         n_tensors, in.remaining());
  }
  // No reserve() for these counts: within the bounds above they may still ask for several
  // times the file's size in memory; the vectors grow only as entries are actually read.

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = in.read_string("metadata key");
    if (!is_valid_utf8(key)) fail("{}: metadata key #{} is not valid UTF-8", p, i);
    if (metadata_index_.count(key)) fail("{}: metadata key '{}' appears twice", p, key);
    GgufType type = read_value_type(in, key);
    GgufValue value = read_value(in, type, key, 0);
    metadata_index_[key] = metadata_.size();
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* align = find("general.alignment")) {
    if (!gguf_type_is_unsigned(align->type)) {
      fail("{}: general.alignment should be an unsigned integer but is {}", p,
           gguf_type_name(align->type));
    }
    uint64_t a = std::get<uint64_t>(align->data);
    if (!is_power_of_two(a) || a > (1u << 20)) {
      fail("{}: general.alignment is {}, which is not a power of two up to 1 MiB", p, a);
    }
    alignment_ = static_cast<uint32_t>(a);
  }

  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo info;
    info.name = in.read_string("tensor name");
    if (!is_valid_utf8(info.name)) fail("{}: the name of tensor #{} is not valid UTF-8", p, i);
    if (tensor_index_.count(info.name)) fail("{}: tensor '{}' appears twice", p, info.name);
    info.n_dims = in.read<uint32_t>("tensor rank");
    if (info.n_dims == 0 || info.n_dims > 4) {
      fail("{}: tensor '{}' has {} dimensions (1 to 4 allowed)", p, info.name, info.n_dims);
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < info.n_dims; ++d) {
      uint64_t extent = in.read<uint64_t>("tensor dimension");
      if (extent == 0 || extent > (uint64_t{1} << 40)) {
        fail("{}: tensor '{}' has an invalid dimension {}", p, info.name, extent);
      }
      if (elements > (uint64_t{1} << 44) / extent) {
        fail("{}: tensor '{}' has too many elements (more than 2^44)", p, info.name);
      }
      elements *= extent;
      info.ne[d] = static_cast<int64_t>(extent);
    }
    info.ggml_type = in.read<uint32_t>("tensor type");
    auto layout = ggml_type_layout(info.ggml_type);
    if (!layout) fail("{}: tensor '{}' has unknown type id {}", p, info.name, info.ggml_type);
    if (info.ne[0] % layout->block_elems != 0) {
      fail("{}: tensor '{}' of type {} has row length {}, not a multiple of its block size {}",
           p, info.name, layout->name, info.ne[0], layout->block_elems);
    }
    info.nbytes = elements / layout->block_elems * layout->block_bytes;
    info.offset = in.read<uint64_t>("tensor offset");
    if (info.offset % alignment_ != 0) {
      fail("{}: tensor '{}' has offset {}, not a multiple of the alignment {}", p, info.name,
           info.offset, alignment_);
    }
    tensor_index_[info.name] = tensors_.size();
    tensors_.push_back(std::move(info));
  }

  data_offset_ = (in.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (tensors_.empty()) return;  // vocab-only files may end without padding
  if (data_offset_ > file_->size()) {
    fail("{}: file is truncated: the tensor data section would start at {} but the file has {} bytes",
         p, data_offset_, file_->size());
  }
  uint64_t data_size = file_->size() - data_offset_;
  for (auto& info : tensors_) {
    if (info.offset > data_size || info.nbytes > data_size - info.offset) {
      fail("{}: tensor '{}' ({} bytes at data offset {}) lies beyond the end of the file "
           "(data section holds {} bytes; the file may be truncated)",
           p, info.name, info.nbytes, info.offset, data_size);
    }
    info.data = file_->data() + data_offset_ + info.offset;
  }
  // No two tensors share bytes. A writer lays them out one after another; a file whose
  // tensors all point at the same bytes would have the loader copy the file once per
  // tensor (model_weights.h copies every matrix at load), gigabytes from a small file.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& info : tensors_) {
    if (info.nbytes > 0) by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& a = *by_offset[i - 1];
    const GgufTensorInfo& b = *by_offset[i];
    if (a.offset + a.nbytes > b.offset) {
      fail("{}: tensors '{}' ({} bytes at data offset {}) and '{}' (at {}) share bytes", p, a.name, a.nbytes,
           a.offset, b.name, b.offset);
    }
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) fail("{}: metadata key '{}' is missing", path(), key);
  return *value;
}

std::string GgufFile::get_string(const std::string& key) const {
  return get(key).as_string(describe(key));
}

uint64_t GgufFile::get_u64(const std::string& key) const { return get(key).as_u64(describe(key)); }

uint64_t GgufFile::get_u64_or(const std::string& key, uint64_t fallback) const {
  const GgufValue* value = find(key);
  return value ? value->as_u64(describe(key)) : fallback;
}

double GgufFile::get_f64_or(const std::string& key, double fallback) const {
  const GgufValue* value = find(key);
  return value ? value->as_f64(describe(key)) : fallback;
}

bool GgufFile::get_bool_or(const std::string& key, bool fallback) const {
  const GgufValue* value = find(key);
  return value ? value->as_bool(describe(key)) : fallback;
}

std::optional<std::string> GgufFile::get_string_opt(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  return value->as_string(describe(key));
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace deferkv
