#include "tokenizer/tokenizer_spec.h"

#include "deferkv/error.h"

namespace deferkv {

std::pair<std::string, std::string> split_merge(const std::string& merge, const std::string& path,
                                                size_t index) {
  const size_t space = merge.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= merge.size()) {
    fail("{}: merge #{} '{}' is not two tokens split by a space", path, index, merge);
  }
  return {merge.substr(0, space), merge.substr(space + 1)};
}

}  // namespace deferkv
