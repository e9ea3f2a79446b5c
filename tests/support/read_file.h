#pragma once
// The whole content of a file (empty when it cannot be read), for tests that check
// what a run wrote.
#include <fstream>
#include <sstream>
#include <string>

namespace deferkv::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

}  // namespace deferkv::testing
