#pragma once
// Byte sizes as users write them: "2147483648", "512MiB", "2GiB" (also KiB, TiB, and
// the decimal KB, MB, GB, TB).
#include <cstdint>
#include <string_view>

namespace deferkv::server {

// Error naming the text when it is not a positive size.
int64_t parse_byte_size(std::string_view text);

}  // namespace deferkv::server
