// Upward through a public header: the model must not see the engine's Session.
#include "deferkv/session.h"
