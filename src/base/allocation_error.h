#pragma once
// A failed allocation says what was being allocated. std::bad_alloc ("std::bad_alloc") and
// std::length_error ("vector::_M_default_append") name nothing a user can act on; a large
// model on a small machine, or a context asked for beyond the memory, should read as which
// file or buffer, and how big.
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "deferkv/error.h"

namespace deferkv {

// Runs `build` and returns what it returns; a failed allocation inside it becomes an Error
// "out of memory while allocating <what()>". `what` is called only then, so it may format.
template <typename Build, typename What>
auto naming_allocation(What&& what, Build&& build) -> decltype(build()) {
  try {
    return std::forward<Build>(build)();
  } catch (const std::bad_alloc&) {
    fail("out of memory while allocating {}", what());
  } catch (const std::length_error&) {
    fail("cannot allocate {}: more than the process can address", what());
  }
}

}  // namespace deferkv
