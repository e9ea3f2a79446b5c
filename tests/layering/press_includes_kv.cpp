// Downward: a press reads the cache. This one must compile.
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
