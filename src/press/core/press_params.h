#pragma once
// The parameters of one press, from the "key=value,..." part of its spec. Every key
// must be one the method declares (PressInfo::parameters); a key not given takes the
// declared default, so defaults live in one place.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deferkv/press.h"

namespace deferkv {

class PressParams {
 public:
  // Parses "key=value,key=value" (may be empty) against the method's declared keys.
  PressParams(const PressInfo& info, const std::string& text);

  int64_t get_int(const std::string& key, int64_t min, int64_t max) const;
  double get_double(const std::string& key, double min, double max) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const { return raw(key); }
  // One of `choices`.
  std::string get_choice(const std::string& key, const std::vector<std::string>& choices) const;
  // Whether the method declares `key` (shared parts read the parameters a method takes).
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::string& name() const { return info_.name; }

  // "name:key=value,..." with every declared key, defaults filled in.
  std::string describe() const;

 private:
  const std::string& raw(const std::string& key) const;

  const PressInfo& info_;
  std::map<std::string, std::string> values_;
};

}  // namespace deferkv
