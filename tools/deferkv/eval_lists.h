#pragma once
// The list options of `deferkv eval` (and bench-press's budgets), parsed: lengths ("4k,8k",
// "1000:8000:1000"), numbers ("0,50,100"), budgets ("64,128" or ratios "0.5,0.75"), and press
// specs, whose own parameters hold commas ("snapkv,deferkv:d=1,eta=0.7" is two presses).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "deferkv/press.h"

namespace deferkv::cli {

// Comma-separated names.
std::vector<std::string> split_names(const std::string& text);
// Items separated by commas; "Nk" is N * 1024; "A:B:S" is A, A+S, … up to B.
std::vector<int64_t> parse_lengths(const std::string& text);
std::vector<double> parse_numbers(const std::string& text, const char* option);
// --kv-budget's entries per head ("64,128"): positive whole numbers; "" none.
std::vector<int64_t> parse_budget_entries(const std::string& text);
// --kv-budget's entries per head ("64,128") and --kv-ratio's ratios ("0.5,0.75"), each with
// its label as reports show it: "64", "r0.5" (eval::labelled_budgets). Either text may be empty.
std::vector<std::pair<KvBudget, std::string>> parse_budgets(const std::string& budgets, const std::string& ratios);
// Split at ';' when there is one, else at the commas that do not continue a press's
// key=value list (a piece with '=' and no ':' belongs to the press before it).
std::vector<std::string> split_press_specs(const std::string& text);

}  // namespace deferkv::cli
