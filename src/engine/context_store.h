#pragma once
// The compressed contexts a batch engine keeps resident, by name (the server's `ctx-...`
// ids), their bytes counted against the same KV memory cap as the running sequences
// (KvAdmission). A context is in use while a running sequence started from it; admission
// drops idle ones, least recently used first, when a sequence needs their memory, never one
// in use. One removed while in use leaves the names at once but keeps its bytes until the
// last sequence using it ends.
//
// [OUR FORMULATION] Only running sequences pin a context: a waiting one holds its own
// reference to the rows (it still runs if the context is dropped meanwhile), so contexts
// wanted by waiting sequences can never block admission forever.
//
// With a directory (the server's --context-dir) every context is also written there when it
// is made (CompressedContext::save: atomic, checksummed), so an idle one dropped for memory is
// spilled rather than lost: find() loads it back on demand (CompressedContext::load, checked
// against the model), and a store opened on the same directory (a restarted server) knows
// every context in it. Files are `<id>.dkvctx`; DELETE removes the file too.
//
// Not thread-safe: the engine holds its lock around it, as around KvAdmission.
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "deferkv/batch_engine.h"
#include "deferkv/compressed_context.h"
#include "engine/kv_admission.h"

namespace deferkv {

class ContextStore {
 public:
  explicit ContextStore(KvAdmission& admission) : admission_(admission) {}
  // Spills to `dir` (created if missing) and knows the contexts already there; `model` checks
  // what is loaded back.
  ContextStore(KvAdmission& admission, std::string dir, std::shared_ptr<const Model> model);

  // Stores `context` under `id` (replacing nothing: ids are unique) and reserves its bytes;
  // make_room() first when they must fit. With a directory its file is written first; when
  // that fails it throws and nothing is stored.
  void insert(const std::string& id, std::shared_ptr<const CompressedContext> context);
  // The context stored under `id`, or nullptr; counts a hit or a miss and marks it used. A
  // spilled one is loaded back and kept again when make_room() finds it room (else it serves
  // the caller alone and stays on disk). A spilled file that fails its checks throws, naming it.
  std::shared_ptr<const CompressedContext> find(const std::string& id);
  // Its description without counting (GET /v1/contexts/{id}); nullopt when unknown.
  std::optional<ResidentContext> describe(const std::string& id) const;
  std::vector<ResidentContext> list() const;  // oldest first
  // Takes `id` out of the names; its bytes go now when idle, else when its last user ends.
  // False when unknown.
  bool remove(const std::string& id);
  // A sequence starting from `context` (named `id`) runs / has ended. pin() is false (and
  // pins nothing) when the name no longer holds that context (dropped or removed since).
  bool pin(const std::string& id, const CompressedContext* context);
  void unpin(const std::string& id, const CompressedContext* context);
  // Drops idle contexts, least recently used first, until `bytes` more fit beside the
  // reservations; false when they do not even then (what it dropped stays dropped).
  bool make_room(int64_t bytes);
  // The bytes of the context stored under `id` (0 when none).
  int64_t bytes_of(const std::string& id) const;

  int64_t resident() const { return static_cast<int64_t>(entries_.size() + removed_in_use_.size()); }
  int64_t bytes() const { return bytes_; }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  int64_t dropped() const { return dropped_; }
  int64_t spilled() const { return static_cast<int64_t>(spilled_.size()); }
  int64_t loads() const { return loads_; }

 private:
  struct Entry {
    std::shared_ptr<const CompressedContext> context;
    int64_t running = 0;     // running sequences started from it
    uint64_t created = 0;    // insertion order
    uint64_t last_used = 0;  // find() or pin() clock
  };
  void release(const Entry& e);
  std::string path_of(const std::string& id) const;

  KvAdmission& admission_;
  std::map<std::string, Entry> entries_;
  std::vector<Entry> removed_in_use_;  // removed while running sequences used them
  std::string dir_;  // "" : nothing is spilled
  std::shared_ptr<const Model> model_;
  std::map<std::string, uint64_t> spilled_;  // on disk only: id -> when it was made (created order)
  uint64_t clock_ = 0;
  int64_t loads_ = 0;
  int64_t bytes_ = 0;
  int64_t hits_ = 0, misses_ = 0, dropped_ = 0;
};

}  // namespace deferkv
