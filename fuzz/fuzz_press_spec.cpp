// The press spec string ("name:key=value,...", joined by '+'), as given to --press. The
// input's first byte picks the budget (none, entries per head, or a compression ratio),
// the rest is the spec. Asserts: only deferkv::Error escapes; a spec that builds
// describes itself with every default filled in, and that description builds a press
// that describes itself the same way (describe() is a fixed point).
#include <cstdint>
#include <string>

#include "deferkv/press.h"
#include "fuzz_support.h"

using namespace deferkv;

namespace {

KvBudget budget_of(uint8_t choice) {
  switch (choice % 3) {
    case 0:
      return {};
    case 1:
      return KvBudget::per_head(1 + choice);
    default:
      return KvBudget::ratio(static_cast<double>(choice) / 256.0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const KvBudget budget = budget_of(data[0]);
  const std::string spec(fuzz::as_text(data + 1, size - 1));
  std::string description;
  if (!fuzz::accepts([&] { description = make_press(spec, budget)->describe(); })) return 0;
  std::string again;
  fuzz::require(fuzz::accepts([&] { again = make_press(description, budget)->describe(); }),
                "a press's description builds again");
  fuzz::require(again == description, "describe() of a described press is the same");
  return 0;
}
