// Upward: the cache (mechanism) must not see the presses (policy).
#include "press/registry.h"
