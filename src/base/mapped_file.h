#pragma once
// A read-only memory map of a whole file. Model weights are used in place from it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace deferkv {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops this process's mapping of the whole pages inside [p, p + bytes) (madvise
  // MADV_DONTNEED): their memory stops counting as this process's, and a later read
  // brings them back from the file. For bytes copied elsewhere at load (row_groups.h).
  void release_pages(const uint8_t* p, size_t bytes) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deferkv
