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
// every context in it. Files are `<id>.dkvctx`; DELETE removes the file too; the temporary
// files of saves that a crash cut short are removed when a store opens the directory.
//
// Not thread-safe: the engine holds its lock around it, as around KvAdmission, except
// write() and load(), the file I/O, which touch no state and run without the lock (a
// context's file is megabytes; the lock is what every request's step and submit wait on).
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

  // With a directory, writes `context`'s file as `id` (CompressedContext::save: atomic);
  // throws when it cannot. Without the lock, before insert().
  void write(const std::string& id, const CompressedContext& context) const;
  // Stores `context` under `id` (replacing nothing: ids are unique) and reserves its bytes;
  // make_room() first when they must fit. With a directory its file must be written first
  // (write()), so that it can be spilled. `budget`: the KvBudget::describe() its press had
  // ("" unknown), which the context does not record (its press's describe() leaves it out)
  // and longest_prefix() matches.
  void insert(const std::string& id, std::shared_ptr<const CompressedContext> context, std::string budget = "");
  // The context stored under `id`, or nullptr; counts a hit or a miss and marks it used. A
  // spilled one is loaded back and kept again when make_room() finds it room (else it serves
  // the caller alone and stays on disk). A spilled file that fails its checks throws, naming it.
  // find() is lookup(), load() and adopt() in one, for a caller that holds no lock.
  std::shared_ptr<const CompressedContext> find(const std::string& id);
  // find() in three steps, so that the file is read without the lock:
  //  - lookup(): a resident context (a hit, marked used), or the file of a spilled one to
  //    load, or neither (a miss);
  //  - load(): reads and checks that file (without the lock; no state);
  //  - adopt(): counts the hit and keeps the loaded context again when the id is still
  //    spilled and make_room() finds it room; one made resident meanwhile (another request
  //    loaded it first) is returned instead, so one id holds one context.
  struct Found {
    std::shared_ptr<const CompressedContext> context;  // resident
    std::string spilled_file;                          // else, when spilled: its file
  };
  Found lookup(const std::string& id);
  std::shared_ptr<const CompressedContext> load(const std::string& file) const;
  std::shared_ptr<const CompressedContext> adopt(const std::string& id, std::shared_ptr<const CompressedContext> loaded);
  // Its description without counting (GET /v1/contexts/{id}); nullopt when unknown.
  std::optional<ResidentContext> describe(const std::string& id) const;
  // The longest resident context (question-agnostic, made with `press`, a describe() string or
  // "full", under `budget`, a KvBudget::describe()) whose tokens begin `prompt`, counted as a
  // hit and marked used; nullopt when none (not a miss: no id was asked for). Spilled
  // contexts are not searched (their tokens are on disk), nor ones loaded back (their budget
  // is not in their file). The server's --context-reuse.
  std::optional<ResidentContext> longest_prefix(const std::vector<int32_t>& prompt, const std::string& press,
                                                const std::string& budget);
  // The budget `id` was inserted with ("" when unknown or none).
  std::string budget_of(const std::string& id) const;
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
    std::string budget;      // insert()'s
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
