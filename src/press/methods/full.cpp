// No compression: the whole cache is kept (the reference every method is judged by).
#include "press/registry.h"

namespace deferkv {
namespace {

class FullPress final : public Press {
 public:
  std::string describe() const override { return "full"; }
  PressPoints points() const override { return {}; }  // it never acts
  void act(const PressAt&, KvCache&) override {}
};

}  // namespace

PressMethod full_method() {
  return {{"full", "no compression: every entry is kept", "-", {}, false},
          [](const PressParams&, const KvBudget&) -> std::unique_ptr<Press> { return std::make_unique<FullPress>(); },
          [](const PressParams&) { return PressRole{false, false}; }};
}

}  // namespace deferkv
