#include "engine/context_store.h"

#include <algorithm>

namespace deferkv {

void ContextStore::insert(const std::string& id, std::shared_ptr<const CompressedContext> context) {
  const int64_t b = context->bytes();
  admission_.reserve(b);
  bytes_ += b;
  ++clock_;
  entries_[id] = Entry{.context = std::move(context), .running = 0, .created = clock_, .last_used = clock_};
}

std::shared_ptr<const CompressedContext> ContextStore::find(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  it->second.last_used = ++clock_;
  return it->second.context;
}

std::optional<ResidentContext> ContextStore::describe(const std::string& id) const {
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return ResidentContext{.id = id, .context = it->second.context, .running = it->second.running};
}

std::vector<ResidentContext> ContextStore::list() const {
  std::vector<std::pair<uint64_t, ResidentContext>> out;
  for (const auto& [id, e] : entries_) out.push_back({e.created, {.id = id, .context = e.context, .running = e.running}});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ResidentContext> list;
  for (auto& [created, c] : out) list.push_back(std::move(c));
  return list;
}

void ContextStore::release(const Entry& e) {
  const int64_t b = e.context->bytes();
  admission_.release(b);
  bytes_ -= b;
}

bool ContextStore::remove(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  if (it->second.running > 0) {
    removed_in_use_.push_back(std::move(it->second));
  } else {
    release(it->second);
  }
  entries_.erase(it);
  return true;
}

bool ContextStore::pin(const std::string& id, const CompressedContext* context) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.context.get() != context) return false;
  ++it->second.running;
  it->second.last_used = ++clock_;
  return true;
}

void ContextStore::unpin(const std::string& id, const CompressedContext* context) {
  if (auto it = entries_.find(id); it != entries_.end() && it->second.context.get() == context) {
    --it->second.running;
    return;
  }
  for (auto it = removed_in_use_.begin(); it != removed_in_use_.end(); ++it) {
    if (it->context.get() != context) continue;
    if (--it->running == 0) {
      release(*it);
      removed_in_use_.erase(it);
    }
    return;
  }
}

bool ContextStore::make_room(int64_t bytes) {
  while (!admission_.fits(bytes)) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.running == 0 && (victim == entries_.end() || it->second.last_used < victim->second.last_used)) {
        victim = it;
      }
    }
    if (victim == entries_.end()) return false;
    release(victim->second);
    entries_.erase(victim);
    ++dropped_;
  }
  return true;
}

int64_t ContextStore::bytes_of(const std::string& id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.context->bytes();
}

}  // namespace deferkv
