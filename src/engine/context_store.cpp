#include "engine/context_store.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "deferkv/error.h"

namespace deferkv {

namespace {
constexpr const char* kExtension = ".dkvctx";
}  // namespace

ContextStore::ContextStore(KvAdmission& admission, std::string dir, std::shared_ptr<const Model> model)
    : admission_(admission), dir_(std::move(dir)), model_(std::move(model)) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_)) fail("the context directory '{}' cannot be made: {}", dir_, ec.message());
  // What a server before this one kept, oldest first (by file time) for the listing; each is
  // checked when it is loaded.
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    const fs::path& p = e.path();
    if (e.is_regular_file() && p.extension() == kExtension) found.push_back({e.last_write_time(), p.stem().string()});
    // A save() that a crash (SIGKILL) cut short left its temporary file, never renamed: it
    // names no context, so it goes.
    if (e.is_regular_file() && p.filename().string().find(std::string(kExtension) + ".tmp.") != std::string::npos) {
      std::error_code ignored;
      fs::remove(p, ignored);
    }
  }
  std::sort(found.begin(), found.end());
  for (const auto& [time, id] : found) spilled_[id] = ++clock_;
}

std::string ContextStore::path_of(const std::string& id) const {
  return (std::filesystem::path(dir_) / (id + kExtension)).string();
}

void ContextStore::write(const std::string& id, const CompressedContext& context) const {
  if (!dir_.empty()) context.save(path_of(id));
}

void ContextStore::insert(const std::string& id, std::shared_ptr<const CompressedContext> context, std::string budget) {
  spilled_.erase(id);
  const int64_t b = context->bytes();
  admission_.reserve(b);
  bytes_ += b;
  ++clock_;
  entries_[id] = Entry{
      .context = std::move(context), .running = 0, .created = clock_, .last_used = clock_, .budget = std::move(budget)};
}

std::shared_ptr<const CompressedContext> ContextStore::find(const std::string& id) {
  Found found = lookup(id);
  if (found.context || found.spilled_file.empty()) return found.context;
  return adopt(id, load(found.spilled_file));
}

ContextStore::Found ContextStore::lookup(const std::string& id) {
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    ++hits_;
    it->second.last_used = ++clock_;
    return {.context = it->second.context, .spilled_file = {}};
  }
  if (!spilled_.count(id)) {
    ++misses_;
    return {};
  }
  return {.context = nullptr, .spilled_file = path_of(id)};
}

std::shared_ptr<const CompressedContext> ContextStore::load(const std::string& file) const {
  return CompressedContext::load(file, *model_);
}

std::shared_ptr<const CompressedContext> ContextStore::adopt(const std::string& id,
                                                             std::shared_ptr<const CompressedContext> loaded) {
  ++hits_;
  ++loads_;
  if (auto it = entries_.find(id); it != entries_.end()) {
    it->second.last_used = ++clock_;
    return it->second.context;
  }
  // Deleted while it was read: it serves the request that asked, as one deleted in use does.
  auto spilled = spilled_.find(id);
  if (spilled == spilled_.end()) return loaded;
  if (make_room(loaded->bytes())) {
    const uint64_t created = spilled->second;
    insert(id, loaded);  // its file is there already
    entries_[id].created = created;
  }
  return loaded;
}

std::optional<ResidentContext> ContextStore::longest_prefix(const std::vector<int32_t>& prompt,
                                                           const std::string& press, const std::string& budget) {
  auto best = entries_.end();
  size_t best_length = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const CompressedContext& c = *it->second.context;
    const std::vector<int32_t>& t = c.tokens();
    // A deferred context resumes its press for the rest of the prompt, as one made without
    // a question serves it.
    const bool made_alone = c.mode() == ContextMode::kQuestionAgnostic || c.mode() == ContextMode::kDeferred;
    if (!made_alone || c.press() != press || it->second.budget.empty() ||
        it->second.budget != budget || t.size() > prompt.size() ||
        t.size() <= best_length || !std::equal(t.begin(), t.end(), prompt.begin())) {
      continue;
    }
    best = it;
    best_length = t.size();
  }
  if (best == entries_.end()) return std::nullopt;
  ++hits_;
  best->second.last_used = ++clock_;
  return ResidentContext{.id = best->first, .context = best->second.context, .running = best->second.running};
}

std::optional<ResidentContext> ContextStore::describe(const std::string& id) const {
  if (spilled_.count(id)) return ResidentContext{.id = id, .context = nullptr, .running = 0};
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return ResidentContext{.id = id, .context = it->second.context, .running = it->second.running};
}

std::vector<ResidentContext> ContextStore::list() const {
  std::vector<std::pair<uint64_t, ResidentContext>> out;
  for (const auto& [id, e] : entries_) out.push_back({e.created, {.id = id, .context = e.context, .running = e.running}});
  for (const auto& [id, created] : spilled_) out.push_back({created, {.id = id, .context = nullptr, .running = 0}});
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
  const bool spilled = spilled_.erase(id) > 0;
  // Only a known id names a file (never a path a client makes up).
  if (!dir_.empty() && (spilled || it != entries_.end())) {
    std::error_code ec;  // a file already gone is no error: the context is what is removed
    std::filesystem::remove(path_of(id), ec);
  }
  if (spilled) return true;
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
    if (!dir_.empty()) spilled_[victim->first] = victim->second.created;  // its file is there since insert()
    entries_.erase(victim);
    ++dropped_;
  }
  return true;
}

std::string ContextStore::budget_of(const std::string& id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? std::string() : it->second.budget;
}

int64_t ContextStore::bytes_of(const std::string& id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.context->bytes();
}

}  // namespace deferkv
