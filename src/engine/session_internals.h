#pragma once
// The engine's view of a Session's cache: the KvCache itself, which the public API keeps
// behind Session::kv_stats() and the functions of embedding.h. For the engine's own files
// and the tests; clients above the engine (eval, server, CLI, Python) use the public API.
#include "deferkv/session.h"
#include "kv/kv_cache.h"

namespace deferkv {

class CompressedContext;

struct SessionInternals {
  static const KvCache& cache(const Session& session) { return *session.cache_; }
  // start_session's work (compressed_context.cpp): the session's cache, position and
  // logits set to the context's.
  static void start_from(Session& session, const CompressedContext& context);
};

inline const KvCache& kv_cache_of(const Session& session) { return SessionInternals::cache(session); }

}  // namespace deferkv
