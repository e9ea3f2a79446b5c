#pragma once
// The most memory operator new held at once while a call ran: the tests of untrusted files
// assert that a file whose counts exceed its contents is refused before anything is
// allocated from those counts. This program replaces the global operator new and delete
// (allocation_meter.cpp) to count; the other test programs do not.
#include <cstdint>
#include <functional>
#include <string>

namespace deferkv::testing {

struct Metered {
  int64_t peak_bytes = 0;  // above what was held when the call began
  std::string error;       // the deferkv::Error the call threw; empty when it returned
};

// Runs `call`; a deferkv::Error it throws is caught and kept, anything else propagates (a
// std::bad_alloc reaching a user is a defect the tests must see).
Metered metered(const std::function<void()>& call);

}  // namespace deferkv::testing
