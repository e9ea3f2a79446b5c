#pragma once
// The list options of `deferkv eval`, parsed: lengths ("4k,8k", "1000:8000:1000"),
// numbers ("0,50,100"), and press specs, whose own parameters hold commas
// ("snapkv,deferkv:d=1,eta=0.7" is two presses).
#include <cstdint>
#include <string>
#include <vector>

namespace deferkv::cli {

// Comma-separated names.
std::vector<std::string> split_names(const std::string& text);
// Items separated by commas; "Nk" is N * 1024; "A:B:S" is A, A+S, … up to B.
std::vector<int64_t> parse_lengths(const std::string& text);
std::vector<double> parse_numbers(const std::string& text, const char* option);
// Split at ';' when there is one, else at the commas that do not continue a press's
// key=value list (a piece with '=' and no ':' belongs to the press before it).
std::vector<std::string> split_press_specs(const std::string& text);

}  // namespace deferkv::cli
