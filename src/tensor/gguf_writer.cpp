#include "tensor/gguf_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <variant>

#include "base/utf8.h"
#include "deferkv/error.h"

namespace deferkv {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian");

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kVersion = 3;

// Limits the reader (gguf_file.cpp) enforces; the writer refuses what it could not read.
constexpr uint32_t kMaxArrayDepth = 4;
constexpr uint64_t kMaxArrayItems = uint64_t{1} << 24;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 20;
constexpr uint64_t kMaxExtent = uint64_t{1} << 40;
constexpr uint64_t kMaxElements = uint64_t{1} << 44;
// ggml keeps tensor names in char[64]; llama.cpp refuses files with longer names.
constexpr size_t kMaxTensorName = 63;

// A file written under a temporary name next to its target and renamed onto the target by
// commit(); destroyed uncommitted (an error on the way), it removes the temporary file.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path) : path_(path) {
    static std::atomic<uint64_t> counter{0};
    // O_EXCL makes the name ours alone; a clash with a stale file just tries the next one.
    for (;;) {
      temp_path_ = fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter++);
      fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) break;
      if (errno != EEXIST) fail("cannot create '{}': {}", temp_path_, std::strerror(errno));
    }
    buffer_.reserve(kBufferBytes);
  }

  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_path_.c_str());
  }

  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  uint64_t size() const { return size_; }

  void write(const void* bytes, size_t n) {
    const auto* p = static_cast<const uint8_t*>(bytes);
    size_ += n;
    if (buffer_.size() + n > kBufferBytes) {
      flush();
      if (n >= kBufferBytes) return write_through(p, n);  // big tensors skip the buffer
    }
    buffer_.insert(buffer_.end(), p, p + n);
  }

  template <typename T>
  void put(T value) {
    write(&value, sizeof(T));
  }

  void put_string(const std::string& text) {
    put<uint64_t>(text.size());
    write(text.data(), text.size());
  }

  void pad_to(uint64_t alignment) {
    static constexpr uint8_t kZeros[256] = {};
    while (size_ % alignment != 0) {
      uint64_t gap = alignment - size_ % alignment;
      write(kZeros, static_cast<size_t>(std::min<uint64_t>(gap, sizeof(kZeros))));
    }
  }

  void commit() {
    flush();
    // fsync before rename: otherwise a crash could leave the new name on empty data.
    if (::fsync(fd_) != 0) fail("cannot write '{}': {}", temp_path_, std::strerror(errno));
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) fail("cannot write '{}': {}", temp_path_, std::strerror(errno));
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      fail("cannot rename '{}' to '{}': {}", temp_path_, path_, std::strerror(errno));
    }
    committed_ = true;
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  void flush() {
    write_through(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  void write_through(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t done = ::write(fd_, p, n);
      if (done < 0 && errno == EINTR) continue;
      if (done < 0) fail("cannot write '{}': {}", temp_path_, std::strerror(errno));
      p += done;
      n -= static_cast<size_t>(done);
    }
  }

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::vector<uint8_t> buffer_;
  uint64_t size_ = 0;
  bool committed_ = false;
};

uint64_t max_unsigned(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
      return std::numeric_limits<uint8_t>::max();
    case GgufType::UINT16:
      return std::numeric_limits<uint16_t>::max();
    case GgufType::UINT32:
      return std::numeric_limits<uint32_t>::max();
    default:
      return std::numeric_limits<uint64_t>::max();
  }
}

int64_t max_signed(GgufType type) {
  switch (type) {
    case GgufType::INT8:
      return std::numeric_limits<int8_t>::max();
    case GgufType::INT16:
      return std::numeric_limits<int16_t>::max();
    case GgufType::INT32:
      return std::numeric_limits<int32_t>::max();
    default:
      return std::numeric_limits<int64_t>::max();
  }
}

// The variant alternative each value type is stored in (see GgufValue).
bool holds_its_type(const GgufValue& value) {
  if (gguf_type_is_unsigned(value.type)) return std::holds_alternative<uint64_t>(value.data);
  if (gguf_type_is_signed(value.type)) return std::holds_alternative<int64_t>(value.data);
  if (gguf_type_is_float(value.type)) return std::holds_alternative<double>(value.data);
  switch (value.type) {
    case GgufType::BOOL:
      return std::holds_alternative<bool>(value.data);
    case GgufType::STRING:
      return std::holds_alternative<std::string>(value.data);
    case GgufType::ARRAY: {
      const auto* array = std::get_if<std::shared_ptr<const GgufArray>>(&value.data);
      return array != nullptr && *array != nullptr;
    }
    default:
      return false;
  }
}

void check_value(const GgufValue& value, const std::string& key, uint32_t depth) {
  if (static_cast<uint32_t>(value.type) > static_cast<uint32_t>(GgufType::FLOAT64)) {
    fail("metadata '{}' has unknown value type {}", key, static_cast<uint32_t>(value.type));
  }
  if (!holds_its_type(value)) {
    fail("metadata '{}' is tagged {} but holds another kind of value", key,
         gguf_type_name(value.type));
  }
  if (gguf_type_is_unsigned(value.type) &&
      std::get<uint64_t>(value.data) > max_unsigned(value.type)) {
    fail("metadata '{}': {} does not fit in {}", key, std::get<uint64_t>(value.data),
         gguf_type_name(value.type));
  }
  if (gguf_type_is_signed(value.type)) {
    int64_t v = std::get<int64_t>(value.data);
    int64_t max = max_signed(value.type);
    if (v > max || v < -max - 1) {
      fail("metadata '{}': {} does not fit in {}", key, v, gguf_type_name(value.type));
    }
  }
  if (value.type == GgufType::ARRAY) {
    if (depth >= kMaxArrayDepth) {
      fail("metadata '{}' nests arrays deeper than {}", key, kMaxArrayDepth);
    }
    const GgufArray& array = value.as_array(key);
    if (array.items.size() > kMaxArrayItems) {
      fail("metadata '{}' has {} array items, more than the {} a reader accepts", key,
           array.items.size(), kMaxArrayItems);
    }
    for (const GgufValue& item : array.items) {
      if (item.type != array.elem_type) {
        fail("metadata '{}': an array of {} holds a {}", key, gguf_type_name(array.elem_type),
             gguf_type_name(item.type));
      }
      check_value(item, key, depth + 1);
    }
  }
}

// Writes the value's payload (its type tag is written by the caller; array items have none).
void write_value(AtomicFile& out, const GgufValue& value) {
  switch (value.type) {
    case GgufType::UINT8:
      return out.put(static_cast<uint8_t>(std::get<uint64_t>(value.data)));
    case GgufType::UINT16:
      return out.put(static_cast<uint16_t>(std::get<uint64_t>(value.data)));
    case GgufType::UINT32:
      return out.put(static_cast<uint32_t>(std::get<uint64_t>(value.data)));
    case GgufType::UINT64:
      return out.put(std::get<uint64_t>(value.data));
    case GgufType::INT8:
      return out.put(static_cast<int8_t>(std::get<int64_t>(value.data)));
    case GgufType::INT16:
      return out.put(static_cast<int16_t>(std::get<int64_t>(value.data)));
    case GgufType::INT32:
      return out.put(static_cast<int32_t>(std::get<int64_t>(value.data)));
    case GgufType::INT64:
      return out.put(std::get<int64_t>(value.data));
    case GgufType::FLOAT32:
      return out.put(static_cast<float>(std::get<double>(value.data)));
    case GgufType::FLOAT64:
      return out.put(std::get<double>(value.data));
    case GgufType::BOOL:
      return out.put<uint8_t>(std::get<bool>(value.data) ? 1 : 0);
    case GgufType::STRING:
      return out.put_string(std::get<std::string>(value.data));
    case GgufType::ARRAY: {
      const GgufArray& array = *std::get<std::shared_ptr<const GgufArray>>(value.data);
      out.put(static_cast<uint32_t>(array.elem_type));
      out.put<uint64_t>(array.items.size());
      for (const GgufValue& item : array.items) write_value(out, item);
      return;
    }
  }
}

uint64_t align_up(uint64_t offset, uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

}  // namespace

void GgufWriter::add_metadata(const std::string& key, GgufValue value) {
  if (!is_valid_utf8(key)) fail("metadata key '{}' is not valid UTF-8", key);
  if (keys_.count(key)) fail("metadata key '{}' is added twice", key);
  check_value(value, key, 0);
  if (key == "general.alignment") {
    if (value.type != GgufType::UINT32) {
      fail("general.alignment must be UINT32, not {}", gguf_type_name(value.type));
    }
    uint64_t a = std::get<uint64_t>(value.data);
    if (!std::has_single_bit(a) || a > kMaxAlignment) {
      fail("general.alignment is {}, which is not a power of two up to 1 MiB", a);
    }
    alignment_ = static_cast<uint32_t>(a);
  }
  keys_.insert(key);
  metadata_.emplace_back(key, std::move(value));
}

uint64_t GgufWriter::check_tensor(const std::string& name, uint32_t ggml_type,
                                  const std::vector<int64_t>& ne) const {
  if (!is_valid_utf8(name)) fail("tensor name '{}' is not valid UTF-8", name);
  if (name.size() > kMaxTensorName) {
    fail("tensor name '{}' is longer than {} bytes", name, kMaxTensorName);
  }
  if (tensor_names_.count(name)) fail("tensor '{}' is added twice", name);
  if (ne.empty() || ne.size() > 4) {
    fail("tensor '{}' has {} dimensions (1 to 4 allowed)", name, ne.size());
  }
  uint64_t elements = 1;
  for (int64_t extent : ne) {
    if (extent <= 0 || static_cast<uint64_t>(extent) > kMaxExtent ||
        elements > kMaxElements / static_cast<uint64_t>(extent)) {
      fail("tensor '{}' has an invalid dimension {}", name, extent);
    }
    elements *= static_cast<uint64_t>(extent);
  }
  auto layout = ggml_type_layout(ggml_type);
  if (!layout) fail("tensor '{}' has unknown type id {}", name, ggml_type);
  if (ne[0] % layout->block_elems != 0) {
    fail("tensor '{}' of type {} has row length {}, not a multiple of its block size {}", name,
         layout->name, ne[0], layout->block_elems);
  }
  return elements / static_cast<uint64_t>(layout->block_elems) *
         static_cast<uint64_t>(layout->block_bytes);
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne,
                            const void* bytes, size_t size) {
  add_tensor(name, static_cast<uint32_t>(type), std::move(ne), bytes, size);
}

void GgufWriter::add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> ne,
                            const void* bytes, size_t size) {
  uint64_t nbytes = check_tensor(name, ggml_type, ne);
  if (size != nbytes) {
    fail("tensor '{}' of type {} and shape {} takes {} bytes, but {} were given", name,
         ggml_type_name(ggml_type), fmt::join(ne, "x"), nbytes, size);
  }
  add_tensor(name, ggml_type, std::move(ne),
             [bytes, size](const GgufByteSink& sink) { sink(bytes, size); });
}

void GgufWriter::add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> ne,
                            GgufTensorSource source) {
  uint64_t nbytes = check_tensor(name, ggml_type, ne);
  tensor_names_.insert(name);
  tensors_.push_back({name, ggml_type, std::move(ne), nbytes, std::move(source)});
}

void GgufWriter::write(const std::string& path) const {
  AtomicFile out(path);
  out.put(kMagic);
  out.put(kVersion);
  out.put<uint64_t>(tensors_.size());
  out.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    out.put_string(key);
    out.put(static_cast<uint32_t>(value.type));
    write_value(out, value);
  }
  uint64_t offset = 0;
  for (const Tensor& tensor : tensors_) {
    out.put_string(tensor.name);
    out.put<uint32_t>(static_cast<uint32_t>(tensor.ne.size()));
    for (int64_t extent : tensor.ne) out.put<uint64_t>(static_cast<uint64_t>(extent));
    out.put(tensor.ggml_type);
    out.put(offset);
    offset = align_up(offset + tensor.nbytes, alignment_);
  }
  // A file without tensors ends right after its header, as gguf-py writes vocab-only files.
  if (!tensors_.empty()) out.pad_to(alignment_);
  for (const Tensor& tensor : tensors_) {
    uint64_t written = 0;
    tensor.source([&](const void* bytes, size_t size) {
      if (size > tensor.nbytes - written) {
        fail("{}: tensor '{}' was given more than its {} bytes", path, tensor.name, tensor.nbytes);
      }
      out.write(bytes, size);
      written += size;
    });
    if (written != tensor.nbytes) {
      fail("{}: tensor '{}' was given {} of its {} bytes", path, tensor.name, written,
           tensor.nbytes);
    }
    out.pad_to(alignment_);
  }
  out.commit();
}

}  // namespace deferkv
