#pragma once
// "a+b": several presses in turn, and the rules that refuse a pair that cannot work
// together (documented at make_press in deferkv/press.h).
#include <memory>
#include <vector>

#include "press/registry.h"

namespace deferkv {

struct RolePress {
  std::unique_ptr<Press> press;
  PressRole role;
};

// Fails, naming both presses, when two parts cannot work together; else a press that
// forwards every hook to each part in order.
std::unique_ptr<Press> compose_presses(std::vector<RolePress> parts);

}  // namespace deferkv
