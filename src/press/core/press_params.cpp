#include "press/core/press_params.h"

#include <charconv>
#include <cstdlib>

#include "deferkv/error.h"

namespace deferkv {
namespace {

std::string known_keys(const PressInfo& info) {
  std::string out;
  for (const auto& p : info.parameters) out += (out.empty() ? "" : ", ") + p.name;
  return out.empty() ? "none" : out;
}

}  // namespace

PressParams::PressParams(const PressInfo& info, const std::string& text) : info_(info) {
  for (const auto& p : info.parameters) values_[p.name] = p.default_value;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      fail("press '{}': '{}' is not key=value", info.name, item);
    }
    const std::string key = item.substr(0, eq);
    // A scorer that reads queries or attention cannot score a piece of the prompt alone
    // (prompt_pieces.h): say so rather than only that the key is unknown.
    if (values_.find(key) == values_.end() && (key == "block" || key == "segment") && values_.count("alloc") != 0) {
      fail("press '{}' cannot take {}=: its score reads the prompt's queries or attention, not only the entries of a "
           "piece; block= and segment= are for the scorers of keys and values (knorm, keydiff, lagkv, leverage, cur, "
           "qfilter, random, streaming_llm)",
           info.name, key);
    }
    if (values_.find(key) == values_.end()) {
      fail("press '{}' has no parameter '{}' (known: {})", info.name, key, known_keys(info));
    }
    values_[key] = item.substr(eq + 1);
    begin = end + 1;
  }
}

const std::string& PressParams::raw(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) fail("internal: press '{}' reads undeclared parameter '{}'", info_.name, key);
  return it->second;
}

int64_t PressParams::get_int(const std::string& key, int64_t min, int64_t max) const {
  const std::string& text = raw(key);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    fail("press '{}': {}={} is not an integer", info_.name, key, text);
  }
  if (value < min || value > max) {
    fail("press '{}': {}={} is out of range [{}, {}]", info_.name, key, value, min, max);
  }
  return value;
}

double PressParams::get_double(const std::string& key, double min, double max) const {
  const std::string& text = raw(key);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    fail("press '{}': {}={} is not a number", info_.name, key, text);
  }
  if (!(value >= min && value <= max)) {
    fail("press '{}': {}={} is out of range [{}, {}]", info_.name, key, text, min, max);
  }
  return value;
}

bool PressParams::get_bool(const std::string& key) const {
  const std::string& text = raw(key);
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  fail("press '{}': {}={} is not a boolean (true/false)", info_.name, key, text);
}

std::string PressParams::get_choice(const std::string& key, const std::vector<std::string>& choices) const {
  const std::string& text = raw(key);
  for (const auto& c : choices) {
    if (c == text) return text;
  }
  std::string known;
  for (const auto& c : choices) known += (known.empty() ? "" : ", ") + c;
  fail("press '{}': {}={} is not one of: {}", info_.name, key, text, known);
}

std::string PressParams::describe() const {
  std::string out = info_.name;
  char sep = ':';
  for (const auto& p : info_.parameters) {
    out += sep + p.name + "=" + values_.at(p.name);
    sep = ',';
  }
  return out;
}

}  // namespace deferkv
