#pragma once
// llama.cpp's prompt escapes, on by default in its tools (--no-escape turns them off):
// \n \r \t \' \" \\ and \xHH; any other backslash is kept as it is.
#include <string>
#include <string_view>

namespace deferkv::cli {

std::string process_escapes(std::string_view text);

}  // namespace deferkv::cli
