#include "deferkv/compressed_context.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>
#include <unistd.h>

#include "base/mapped_file.h"
#include "base/sha256.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "engine/compressed_context_state.h"
#include "engine/generation_step.h"
#include "engine/session_internals.h"
#include "engine/session_phase.h"
#include "kv/kv_cache_type.h"
#include "tensor/dtype.h"

namespace deferkv {

// The file is written in the machine's byte order and read as little-endian: every machine
// deferkv builds for is (x86-64, aarch64).
static_assert(std::endian::native == std::endian::little, "the compressed context file is little-endian");

namespace {

// docs/compressed_context.md.
constexpr char kMagic[8] = {'D', 'K', 'V', 'C', 'T', 'X', '\r', '\n'};
// Version 2 added the deferred section (ContextMode::kDeferred). A context without one is
// written as version 1, the same bytes as before it, so older builds still read it (and a
// version 1 file read and written again is the same file).
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOldestVersion = 1;
constexpr size_t kDigestChars = 64;
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 4 + 8 + kDigestChars;
// Limits stated in the format (fuzz/README.md, "What a file may ask for").
constexpr uint32_t kMaxPressChars = 4096;
constexpr uint32_t kMaxTypeChars = 16;
constexpr uint32_t kMaxShape = 1 << 16;  // layers, KV heads, head_dim

// The SHA-256 of a model's file, read once per file version a process sees: a server or a
// test makes many contexts and sessions of one model, and hashing a 100 MB file takes a
// noticeable fraction of a second.
const std::string& model_file_sha256(const Model& model) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, std::string> known;
  struct stat st {};
  if (::stat(model.path().c_str(), &st) != 0) fail("cannot read the model file '{}' to identify it", model.path());
  const auto key = std::make_tuple(model.path(), static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec),
                                   static_cast<int64_t>(st.st_mtim.tv_nsec));
  {
    std::lock_guard lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  std::string digest = sha256_file(model.path());
  std::lock_guard lock(mutex);
  return known.emplace(key, std::move(digest)).first->second;
}

// The session's cache as it stands (every head's rows, positions and key shift) and the
// logits of its last token.
void take_rows(const Session& session, CompressedContext::State& s) {
  const KvCache& cache = kv_cache_of(session);
  s.n_layer = cache.n_layer();
  s.n_head_kv = cache.n_head_kv();
  s.kv = cache.snapshot();
  const float* last = session.last_logits();
  s.logits.assign(last, last + session.model().config().n_vocab);
}

class Writer {
 public:
  template <typename T>
  void put(T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    out.insert(out.end(), p, p + n);
  }
  void put_string(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    put_bytes(s.data(), s.size());
  }
  std::vector<uint8_t> out;
};

// Reads the payload, every count checked against the bytes left before anything is
// allocated from it; errors name the file and the field.
class Reader {
 public:
  Reader(const std::string& path, const uint8_t* data, size_t size) : path_(path), p_(data), left_(size) {}

  template <typename T>
  T get(const char* field) {
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, p_, sizeof(T));
    advance(sizeof(T));
    return value;
  }
  std::string get_string(const char* field, uint32_t max_chars) {
    const auto n = get<uint32_t>(field);
    if (n > max_chars) fail("compressed context '{}': {} has {} bytes, more than the {} allowed", path_, field, n, max_chars);
    need(n, field);
    std::string s(reinterpret_cast<const char*>(p_), n);
    advance(n);
    return s;
  }
  // A count of items of `item_bytes` each that must all be in the file.
  uint64_t get_count(const char* field, uint64_t item_bytes) {
    const auto n = get<uint64_t>(field);
    if (item_bytes > 0 && n > left_ / item_bytes) {
      fail("compressed context '{}' is truncated or corrupt: {} says {}, more than the {} bytes left hold", path_, field,
           n, left_);
    }
    return n;
  }
  template <typename T>
  void get_array(std::vector<T>& out, uint64_t n, const char* field) {
    need(n * sizeof(T), field);  // get_count has bounded n by the bytes left
    out.resize(static_cast<size_t>(n));
    if (n > 0) std::memcpy(out.data(), p_, static_cast<size_t>(n) * sizeof(T));
    advance(static_cast<size_t>(n) * sizeof(T));
  }
  size_t left() const { return left_; }
  [[noreturn]] void corrupt(const std::string& what) const { fail("compressed context '{}' is corrupt: {}", path_, what); }

 private:
  void need(uint64_t n, const char* field) const {
    if (n > left_) fail("compressed context '{}' is truncated: {} needs {} bytes, {} are left", path_, field, n, left_);
  }
  void advance(size_t n) {
    p_ += n;
    left_ -= n;
  }
  const std::string& path_;
  const uint8_t* p_;
  size_t left_;
};

}  // namespace

const char* context_mode_name(ContextMode mode) {
  switch (mode) {
    case ContextMode::kQuestionAgnostic: return "question-agnostic";
    case ContextMode::kQuestionAware: return "question-aware";
    case ContextMode::kDeferred: return "deferred";
  }
  return "unknown";
}

CompressedContext::CompressedContext() : state_(std::make_unique<State>()) {}
CompressedContext::~CompressedContext() = default;

int64_t CompressedContext::kept_entries() const {
  int64_t n = 0;
  for (int64_t length : state_->kv.lengths) n += length;
  return n;
}

int64_t CompressedContext::bytes() const {
  int64_t n = 0;
  for (size_t i = 0; i < state_->kv.lengths.size(); ++i) {
    n += static_cast<int64_t>(state_->kv.keys[i].size() + state_->kv.values[i].size() +
                              state_->kv.positions[i].size() * sizeof(int32_t));
  }
  if (deferred_) {
    for (const auto& scores : deferred_->scores) n += static_cast<int64_t>(scores.size() * (sizeof(float) + sizeof(int32_t)));
  }
  return n;
}

namespace {

enum class ContextPress : uint8_t { kAtPrefillEnd, kDeferred };

// What the session's press makes of a context: its cache at the prefill's end, or (deferkv)
// a deferred context whose questions each evict at their own step d. Any other press that
// evicts after the prefill is refused: what it keeps depends on what is read after it.
ContextPress context_kind_of(const Session& session) {
  if (!session.press()) return ContextPress::kAtPrefillEnd;
  const std::string press = session.press()->describe();
  if (press_resumes_deferred(press)) return ContextPress::kDeferred;
  if (press_evicts_after_prefill(press)) {
    fail("press '{}' evicts after the prefill (at a decode step or while decoding), so what it keeps depends on what "
         "is read after the context: a compressed context, shared by many questions, holds the cache at the "
         "prefill's end only; use a press that evicts once at the prefill's end, or deferkv (each question then "
         "evicts at its own step d)", press);
  }
  return ContextPress::kAtPrefillEnd;
}

}  // namespace

std::shared_ptr<const CompressedContext> CompressedContext::compress(Session& session, const std::vector<int32_t>& tokens,
                                                                     int64_t question_tokens) {
  if (session.n_past() != 0) {
    fail("a context is compressed on a fresh session: this one already holds {} tokens", session.n_past());
  }
  context_kind_of(session);  // refuses a press that evicts later before the prefill is spent
  session.prefill(tokens, question_tokens);
  return capture(session, tokens, question_tokens);
}

std::shared_ptr<const CompressedContext> CompressedContext::capture(const Session& session,
                                                                    const std::vector<int32_t>& tokens,
                                                                    int64_t question_tokens) {
  const std::string press = session.press() ? session.press()->describe() : "full";
  const bool deferred = context_kind_of(session) == ContextPress::kDeferred;
  if (session.n_past() == 0 || session.timings().prefill_tokens != static_cast<int64_t>(tokens.size())) {
    fail("a context is captured from a session that has prefilled exactly its {} tokens from the start",
         tokens.size());
  }
  std::shared_ptr<CompressedContext> c(new CompressedContext());
  const KvCache& cache = kv_cache_of(session);
  c->tokens_ = tokens;
  c->model_sha256_ = model_file_sha256(session.model());
  c->press_ = press;
  c->cache_type_k_ = kv_cache_type_name(cache.types().keys);
  c->cache_type_v_ = kv_cache_type_name(cache.types().values);
  c->mode_ = deferred               ? ContextMode::kDeferred
             : question_tokens > 0 ? ContextMode::kQuestionAware
                                   : ContextMode::kQuestionAgnostic;
  c->n_past_ = session.n_past();
  if (deferred) {
    c->deferred_ = session.press()->deferred_eviction();
    if (!c->deferred_) fail("press '{}' holds no deferred eviction after its prefill", press);
  }
  take_rows(session, *c->state_);
  return c;
}

std::shared_ptr<const CompressedContext> CompressedContext::extend(const Session& session, const CompressedContext& base,
                                                                   const std::vector<int32_t>& appended) {
  if (base.deferred_) {
    // The session resumed the context's press: its step d must have come in the turn.
    const auto& eviction = session.last_eviction();
    if (!eviction || eviction->decode_step == 0) {
      fail("a deferred context is extended after its question's eviction at decode step d; this turn ended before it");
    }
  } else if (session.press()) {
    fail("a context is extended from a session started from it, which has no press of its own");
  }
  const auto n_appended = static_cast<int64_t>(appended.size());
  if (session.n_past() != base.n_past() + n_appended) {
    fail("a context of {} positions extended by {} tokens needs a session at position {}, not {}", base.n_past(),
         n_appended, base.n_past() + n_appended, session.n_past());
  }
  base.check_model(session.model());
  const KvCache& cache = kv_cache_of(session);
  std::shared_ptr<CompressedContext> c(new CompressedContext());
  c->tokens_ = base.tokens_;
  c->tokens_.insert(c->tokens_.end(), appended.begin(), appended.end());
  c->model_sha256_ = base.model_sha256_;
  c->press_ = base.press_;
  c->cache_type_k_ = kv_cache_type_name(cache.types().keys);
  c->cache_type_v_ = kv_cache_type_name(cache.types().values);
  if (c->cache_type_k_ != base.cache_type_k_ || c->cache_type_v_ != base.cache_type_v_) {
    fail("the session stores its cache as {}/{}, the context it extends as {}/{}", c->cache_type_k_, c->cache_type_v_,
         base.cache_type_k_, base.cache_type_v_);
  }
  // A deferred base's turn has chosen: what follows reads its rows as they are.
  c->mode_ = base.mode_ == ContextMode::kDeferred ? ContextMode::kQuestionAgnostic : base.mode_;
  c->n_past_ = session.n_past();
  take_rows(session, *c->state_);
  return c;
}

void CompressedContext::check_made_with(const std::string& press, const std::string& cache_type_k,
                                        const std::string& cache_type_v) const {
  if (press != press_) fail("the compressed context was made with press '{}', not '{}'", press_, press);
  if (cache_type_k != cache_type_k_ || cache_type_v != cache_type_v_) {
    fail("the compressed context stores its cache as {}/{} (keys/values), not {}/{}", cache_type_k_, cache_type_v_,
         cache_type_k, cache_type_v);
  }
}

void CompressedContext::check_deferred_budget(const KvBudget& budget) const {
  if (deferred_ && budget.describe() != deferred_->budget.describe()) {
    fail("the deferred context was made with budget {}, not {}", deferred_->budget.describe(), budget.describe());
  }
}

void CompressedContext::check_model(const Model& model) const {
  const std::string& sha = model_file_sha256(model);
  if (sha != model_sha256_) {
    fail("the compressed context was made for another model (sha256 {}), not '{}' (sha256 {})", model_sha256_,
         model.path(), sha);
  }
  // The same file has the same shape; a context read from a crafted file may still lie.
  const ModelConfig& c = model.config();
  if (state_->n_layer != c.n_layer || state_->n_head_kv != c.n_head_kv || state_->kv.head_dim != c.head_dim ||
      static_cast<int64_t>(state_->logits.size()) != c.n_vocab) {
    fail("the compressed context's shape ({} layers, {} KV heads of {}, {} logits) is not that of '{}' ({}, {} of {}, "
         "vocabulary {})", state_->n_layer, state_->n_head_kv, state_->kv.head_dim, state_->logits.size(), model.path(),
         c.n_layer, c.n_head_kv, c.head_dim, c.n_vocab);
  }
  for (int32_t t : tokens_) {
    if (t < 0 || t >= c.n_vocab) fail("the compressed context's token {} is outside the vocabulary of '{}'", t, model.path());
  }
}

void CompressedContext::save(const std::string& path) const {
  Writer w;
  w.put_string(model_sha256_);
  w.put_string(press_);
  w.put_string(cache_type_k_);
  w.put_string(cache_type_v_);
  w.put(static_cast<uint8_t>(mode_));
  w.put(static_cast<uint32_t>(state_->n_layer));
  w.put(static_cast<uint32_t>(state_->n_head_kv));
  w.put(static_cast<uint32_t>(state_->kv.head_dim));
  w.put(static_cast<int64_t>(n_past_));
  w.put(static_cast<uint64_t>(tokens_.size()));
  w.put_bytes(tokens_.data(), tokens_.size() * sizeof(int32_t));
  w.put(static_cast<uint64_t>(state_->logits.size()));
  w.put_bytes(state_->logits.data(), state_->logits.size() * sizeof(float));
  const KvCache::Snapshot& kv = state_->kv;
  for (size_t i = 0; i < kv.lengths.size(); ++i) {
    w.put(static_cast<uint64_t>(kv.lengths[i]));
    w.put(static_cast<uint32_t>(kv.key_shifts[i].size()));
    w.put_bytes(kv.key_shifts[i].data(), kv.key_shifts[i].size() * sizeof(float));
    w.put_bytes(kv.positions[i].data(), kv.positions[i].size() * sizeof(int32_t));
    w.put_bytes(kv.keys[i].data(), kv.keys[i].size());
    w.put_bytes(kv.values[i].data(), kv.values[i].size());
  }
  if (deferred_) {
    // The deferred section (version 2): the press's budget, its prompt's end, and each
    // head's scored positions with their window scores.
    const DeferredEviction& d = *deferred_;
    w.put(static_cast<int64_t>(d.budget.entries_per_head()));
    w.put(d.budget.compression_ratio());
    w.put(static_cast<int64_t>(d.prompt_end));
    for (size_t i = 0; i < d.scores.size(); ++i) {
      w.put(static_cast<uint64_t>(d.scores[i].size()));
      w.put_bytes(d.positions[i].data(), d.positions[i].size() * sizeof(int32_t));
      w.put_bytes(d.scores[i].data(), d.scores[i].size() * sizeof(float));
    }
  }
  const std::string digest = sha256_hex(std::string_view(reinterpret_cast<const char*>(w.out.data()), w.out.size()));
  Writer header;
  header.put_bytes(kMagic, sizeof(kMagic));
  header.put(deferred_ ? kVersion : kOldestVersion);
  header.put(uint32_t{0});
  header.put(static_cast<uint64_t>(w.out.size()));
  header.put_bytes(digest.data(), digest.size());

  // A reader (another server, a crash half-way) sees the old file or the whole new one.
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(header.out.data()), static_cast<std::streamsize>(header.out.size()));
    out.write(reinterpret_cast<const char*>(w.out.data()), static_cast<std::streamsize>(w.out.size()));
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      fail("cannot write the compressed context '{}'", temporary);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    fail("cannot rename '{}' to '{}'", temporary, path);
  }
}

namespace {

// The payload after a header that names this format and version, whose size and SHA-256
// match the file: everything read from it after this is at least what was written.
std::string_view checked_payload(const MappedFile& file, const std::string& path, uint32_t& version) {
  if (file.size() < kHeaderBytes || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    fail("'{}' is not a compressed context (no DKVCTX header)", path);
  }
  Reader header(path, file.data() + sizeof(kMagic), kHeaderBytes - sizeof(kMagic));
  version = header.get<uint32_t>("version");
  if (version < kOldestVersion || version > kVersion) {
    fail("compressed context '{}' has format version {}; this build reads {} to {}", path, version, kOldestVersion,
         kVersion);
  }
  if (header.get<uint32_t>("flags") != 0) header.corrupt("the header's flags are not 0");
  const auto payload_bytes = header.get<uint64_t>("payload size");
  if (payload_bytes != file.size() - kHeaderBytes) {
    fail("compressed context '{}' is truncated or has trailing bytes: its header says {} bytes of payload, the file "
         "holds {}", path, payload_bytes, file.size() - kHeaderBytes);
  }
  const std::string stored(reinterpret_cast<const char*>(file.data()) + kHeaderBytes - kDigestChars, kDigestChars);
  const std::string_view payload(reinterpret_cast<const char*>(file.data()) + kHeaderBytes, payload_bytes);
  if (sha256_hex(payload) != stored) fail("compressed context '{}' is corrupt: its payload does not match its SHA-256", path);
  return payload;
}

// The cache's shape and types, each bounded before any head is read.
void read_shape(Reader& r, const std::string& type_k, const std::string& type_v, CompressedContext::State& s) {
  const auto n_layer = r.get<uint32_t>("layer count");
  const auto n_head_kv = r.get<uint32_t>("KV head count");
  const auto head_dim = r.get<uint32_t>("head_dim");
  if (n_layer == 0 || n_layer > kMaxShape || n_head_kv == 0 || n_head_kv > kMaxShape || head_dim == 0 ||
      head_dim > kMaxShape) {
    r.corrupt(fmt::format("a shape of {} layers, {} KV heads of {} (each 1..{})", n_layer, n_head_kv, head_dim, kMaxShape));
  }
  s.n_layer = n_layer;
  s.n_head_kv = n_head_kv;
  s.kv.head_dim = head_dim;
  try {
    s.kv.types = {kv_cache_type_from_name(type_k), kv_cache_type_from_name(type_v)};
    check_kv_cache_type(s.kv.types.keys, head_dim, "keys");
    check_kv_cache_type(s.kv.types.values, head_dim, "values");
  } catch (const Error& e) {
    r.corrupt(e.what());
  }
}

// Every layer's and KV head's kept rows: at most `n_past` entries a head, at increasing
// positions before `n_past`, each count bounded by the bytes left before it is allocated.
void read_heads(Reader& r, const std::string& path, int64_t n_past, CompressedContext::State& s) {
  KvCache::Snapshot& kv = s.kv;
  const int64_t key_row = dtype_row_bytes(kv.types.keys, kv.head_dim);
  const int64_t value_row = dtype_row_bytes(kv.types.values, kv.head_dim);
  const uint64_t heads = static_cast<uint64_t>(s.n_layer) * static_cast<uint64_t>(s.n_head_kv);
  constexpr uint64_t kLeastHeadBytes = sizeof(uint64_t) + sizeof(uint32_t);
  if (heads > r.left() / kLeastHeadBytes) {
    fail("compressed context '{}' is truncated or corrupt: {} heads cannot fit in the {} bytes left", path, heads, r.left());
  }
  for (uint64_t i = 0; i < heads; ++i) {
    const uint64_t length = r.get_count("a head's entry count", sizeof(int32_t) + key_row + value_row);
    if (length > static_cast<uint64_t>(n_past)) {
      r.corrupt(fmt::format("head {} holds {} entries, more than its position {}", i, length, n_past));
    }
    const auto shift = r.get<uint32_t>("a head's key shift count");
    if (shift != 0 && shift != static_cast<uint64_t>(kv.head_dim)) {
      r.corrupt(fmt::format("head {}'s key shift has {} values, not 0 or {}", i, shift, kv.head_dim));
    }
    r.get_array(kv.key_shifts.emplace_back(), shift, "a head's key shift");
    std::vector<int32_t>& positions = kv.positions.emplace_back();
    r.get_array(positions, length, "a head's positions");
    for (size_t j = 0; j < positions.size(); ++j) {
      if (positions[j] < 0 || positions[j] >= n_past || (j > 0 && positions[j] <= positions[j - 1])) {
        r.corrupt(fmt::format("head {}'s positions are not increasing within 0..{}", i, n_past - 1));
      }
    }
    r.get_array(kv.keys.emplace_back(), length * static_cast<uint64_t>(key_row), "a head's keys");
    r.get_array(kv.values.emplace_back(), length * static_cast<uint64_t>(value_row), "a head's values");
    kv.lengths.push_back(static_cast<int64_t>(length));
  }
}

// The deferred section: a budget of one kind, the prompt's end at the context's position,
// and per head scored positions increasing within it, each count bounded by the bytes left.
DeferredEviction read_deferred(Reader& r, int64_t n_past, uint64_t heads) {
  DeferredEviction d;
  const auto per_head = r.get<int64_t>("the deferred budget's entries per head");
  const auto ratio = r.get<double>("the deferred budget's ratio");
  // The writer's two forms exactly (a per-head budget has the ratio -1), so that a context
  // read is written back byte for byte.
  if (per_head > 0 && ratio == -1.0) {
    d.budget = KvBudget::per_head(per_head);
  } else if (per_head == 0 && ratio >= 0 && ratio < 1) {
    d.budget = KvBudget::ratio(ratio);
  } else {
    r.corrupt(fmt::format("the deferred budget ({} per head, ratio {}) is neither a count (ratio -1) nor a ratio in "
                          "[0, 1)",
                          per_head, ratio));
  }
  d.prompt_end = r.get<int64_t>("the deferred prompt's end");
  if (d.prompt_end != n_past) r.corrupt(fmt::format("the deferred prompt ends at {}, not at its position {}", d.prompt_end, n_past));
  constexpr uint64_t kEntryBytes = sizeof(int32_t) + sizeof(float);
  if (heads > r.left() / sizeof(uint64_t)) r.corrupt(fmt::format("{} heads' deferred scores cannot fit in the {} bytes left", heads, r.left()));
  for (uint64_t i = 0; i < heads; ++i) {
    const uint64_t n = r.get_count("a head's deferred score count", kEntryBytes);
    std::vector<int32_t>& positions = d.positions.emplace_back();
    r.get_array(positions, n, "a head's deferred positions");
    for (size_t j = 0; j < positions.size(); ++j) {
      if (positions[j] < 0 || positions[j] >= n_past || (j > 0 && positions[j] <= positions[j - 1])) {
        r.corrupt(fmt::format("head {}'s deferred positions are not increasing within 0..{}", i, n_past - 1));
      }
    }
    std::vector<float>& scores = d.scores.emplace_back();
    r.get_array(scores, n, "a head's deferred scores");
    for (float x : scores) {
      if (!std::isfinite(x)) r.corrupt(fmt::format("head {}'s deferred scores are not all finite", i));
    }
  }
  return d;
}

}  // namespace

// In the order save() writes: the description, the shape, the tokens and logits, the heads.
namespace {

// press_resumes_deferred for a description read from a file: an unknown or malformed one
// does not.
bool press_resumes_deferred_checked(const std::string& press) {
  try {
    return press_resumes_deferred(press);
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

std::shared_ptr<const CompressedContext> CompressedContext::read(const std::string& path) {
  const MappedFile file(path);
  uint32_t version = 0;
  const std::string_view payload = checked_payload(file, path, version);
  Reader r(path, reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  std::shared_ptr<CompressedContext> c(new CompressedContext());
  c->model_sha256_ = r.get_string("model sha256", kDigestChars);
  if (c->model_sha256_.size() != kDigestChars) r.corrupt("the model's sha256 is not 64 hex digits");
  c->press_ = r.get_string("press", kMaxPressChars);
  c->cache_type_k_ = r.get_string("cache type of keys", kMaxTypeChars);
  c->cache_type_v_ = r.get_string("cache type of values", kMaxTypeChars);
  const auto mode = r.get<uint8_t>("mode");
  const uint8_t modes = version >= 2 ? 3 : 2;  // deferred contexts came with version 2
  if (mode >= modes) {
    r.corrupt(fmt::format("mode {} is not 0 (question-agnostic), 1 (question-aware){} in version {}", mode,
                          version >= 2 ? " or 2 (deferred)" : "", version));
  }
  c->mode_ = static_cast<ContextMode>(mode);
  // The writer writes version 2 for a deferred context only.
  if (version >= 2 && c->mode_ != ContextMode::kDeferred) {
    r.corrupt(fmt::format("version {} holds a deferred context (mode 2), not mode {}", version, mode));
  }
  read_shape(r, c->cache_type_k_, c->cache_type_v_, *c->state_);

  c->n_past_ = r.get<int64_t>("position");
  const uint64_t n_tokens = r.get_count("token count", sizeof(int32_t));
  if (n_tokens == 0) r.corrupt("it holds no tokens");
  if (c->n_past_ <= 0 || static_cast<uint64_t>(c->n_past_) > n_tokens) {
    r.corrupt(fmt::format("its position {} is not within 1..{} (its tokens)", c->n_past_, n_tokens));
  }
  r.get_array(c->tokens_, n_tokens, "tokens");
  const uint64_t n_logits = r.get_count("logit count", sizeof(float));
  if (n_logits == 0) r.corrupt("it holds no logits");
  r.get_array(c->state_->logits, n_logits, "logits");
  read_heads(r, path, c->n_past_, *c->state_);
  if (c->mode_ == ContextMode::kDeferred) {
    if (!press_resumes_deferred_checked(c->press_)) {
      r.corrupt(fmt::format("it is deferred, but press '{}' does not resume a deferred eviction", c->press_));
    }
    c->deferred_ = read_deferred(r, c->n_past_, static_cast<uint64_t>(c->state_->n_layer * c->state_->n_head_kv));
  }
  if (r.left() != 0) r.corrupt(fmt::format("{} bytes follow the last section", r.left()));
  return c;
}

std::shared_ptr<const CompressedContext> CompressedContext::load(const std::string& path, const Model& model) {
  std::shared_ptr<const CompressedContext> c = read(path);
  try {
    c->check_model(model);
  } catch (const Error& e) {
    fail("cannot use '{}': {}", path, e.what());
  }
  return c;
}

void SessionInternals::start_from(Session& session, const CompressedContext& context) {
  session.expect_phase("starting from a compressed context", {SessionPhase::kIdle});
  if (session.press_) {
    fail("a session starts from a compressed context without a press: the context's press ('{}') has done its work, "
         "and press '{}' would not see the prompt it expects", context.press(), session.press_->describe());
  }
  if (session.n_past_ != 0) {
    fail("a session starts from a compressed context before anything is fed: this one holds {} tokens", session.n_past_);
  }
  context.check_model(*session.model_);
  const KvCache& cache = *session.cache_;
  const std::string k = kv_cache_type_name(cache.types().keys), v = kv_cache_type_name(cache.types().values);
  if (k != context.cache_type_k() || v != context.cache_type_v()) {
    fail("the compressed context stores its cache as {}/{} (keys/values), the session as {}/{}", context.cache_type_k(),
         context.cache_type_v(), k, v);
  }
  if (context.n_past() >= session.n_ctx_) {
    fail("the compressed context of {} positions leaves no room in a session of {} tokens; raise the context size "
         "(n_ctx)", context.n_past(), session.n_ctx_);
  }
  if (const DeferredEviction* deferred = context.deferred()) {
    // The context's press, rebuilt and waiting for this question's step d. Attached before
    // the rows come in, as it would be before the prefill; a refusal leaves the session bare.
    session.set_press(make_press(context.press(), deferred->budget));
    try {
      session.cache_->restore(context.state().kv);
      session.press_->resume_deferred(*deferred);
    } catch (...) {
      session.cache_->truncate(0);
      session.set_press(nullptr);
      throw;
    }
  } else {
    session.cache_->restore(context.state().kv);
  }
  session.n_past_ = context.n_past();
  session.decode_step_ = 0;
  session.logits_ = context.state().logits;
}

void start_session(Session& session, const CompressedContext& context) { SessionInternals::start_from(session, context); }

GenerateResult generate(Session& session, const CompressedContext& context, const std::vector<int32_t>& question,
                        const GenerateOptions& options, Sampler& sampler, const std::function<bool(int32_t)>& on_token) {
  GenerateResult result;
  start_session(session, context);
  if (!question.empty()) session.prefill_question(question);
  if (options.after_prefill) options.after_prefill(session);
  for (int32_t t : context.tokens()) sampler.accept(t);
  for (int32_t t : question) sampler.accept(t);
  while (const std::optional<int32_t> token = next_token_to_decode(session, sampler, options, result, on_token)) {
    session.decode(*token);
  }
  return result;
}

}  // namespace deferkv
