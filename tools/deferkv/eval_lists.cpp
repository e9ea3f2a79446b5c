#include "eval_lists.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/eval_run.h"
#include "eval/metrics/python_text.h"

namespace deferkv::cli {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  const std::vector<std::string_view> pieces = eval::split_on(text, separator);
  return {pieces.begin(), pieces.end()};
}

int64_t parse_length(const std::string& item) {
  const bool kilo = !item.empty() && (item.back() == 'k' || item.back() == 'K');
  const std::string digits = kilo ? item.substr(0, item.size() - 1) : item;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || value <= 0) {
    fail("--lengths: '{}' is not a positive token count such as 4096 or 4k", item);
  }
  return kilo ? value * 1024 : value;
}

}  // namespace

std::vector<std::string> split_names(const std::string& text) { return split(text, ','); }

std::vector<int64_t> parse_lengths(const std::string& text) {
  std::vector<int64_t> lengths;
  for (const std::string& item : split(text, ',')) {
    const std::vector<std::string> range = split(item, ':');
    if (range.size() == 1) {
      lengths.push_back(parse_length(item));
    } else if (range.size() == 3) {
      const int64_t first = parse_length(range[0]), last = parse_length(range[1]), step = parse_length(range[2]);
      if (last < first) fail("--lengths: the range '{}' ends before it starts", item);
      for (int64_t n = first; n <= last; n += step) lengths.push_back(n);
    } else {
      fail("--lengths: '{}' is neither a length nor a range start:end:step", item);
    }
  }
  return lengths;
}

std::vector<double> parse_numbers(const std::string& text, const char* option) {
  std::vector<double> numbers;
  for (const std::string& item : split(text, ',')) {
    double value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc() || end != item.data() + item.size()) {
      fail("{}: '{}' is not a number", option, item);
    }
    numbers.push_back(value);
  }
  return numbers;
}

std::vector<std::string> split_press_specs(const std::string& text) {
  if (text.find(';') != std::string::npos) return split(text, ';');
  std::vector<std::string> specs;
  for (const std::string& piece : split(text, ',')) {
    const size_t equals = piece.find('=');
    const bool continues = !specs.empty() && equals != std::string::npos && piece.find(':') > equals;
    if (continues) {
      specs.back() += "," + piece;
    } else {
      specs.push_back(piece);
    }
  }
  return specs;
}

std::vector<int64_t> parse_budget_entries(const std::string& text) {
  std::vector<int64_t> entries;
  if (text.empty()) return entries;
  for (double b : parse_numbers(text, "--kv-budget")) {
    if (b < 1 || b != std::floor(b)) fail("--kv-budget: {} is not a positive whole number of entries", b);
    entries.push_back(static_cast<int64_t>(b));
  }
  return entries;
}

std::vector<std::pair<KvBudget, std::string>> parse_budgets(const std::string& budgets, const std::string& ratios) {
  return eval::labelled_budgets(parse_budget_entries(budgets),
                                ratios.empty() ? std::vector<double>{} : parse_numbers(ratios, "--kv-ratio"));
}

}  // namespace deferkv::cli
