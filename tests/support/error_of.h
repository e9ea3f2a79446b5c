#pragma once
// The message of the deferkv::Error a call throws ("" when it throws none), for tests
// of error messages.
#include <functional>
#include <string>

#include "deferkv/error.h"

namespace deferkv::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace deferkv::testing
