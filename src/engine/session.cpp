#include "deferkv/session.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "base/allocation_error.h"
#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/model_readout.h"
#include "deferkv/tokenizer.h"
#include "engine/scoped_timer.h"
#include "engine/session_phase.h"
#include "engine/session_press_host.h"
#include "kernels/matvec.h"
#include "kv/kv_cache.h"
#include "model/forward_pass.h"
#include "observe/attention_tap.h"
#include "observe/residual_tap.h"
#include "tensor/dtype.h"

namespace deferkv {
namespace {

constexpr int64_t kDefaultMaxContext = 4096;

// Returns a session to idle (its phase variant's first alternative) when the scope ends, on
// an error too.
template <typename Phase>
struct IdleOnExit {
  Phase& phase;
  ~IdleOnExit() { phase.template emplace<0>(); }
};

}  // namespace

struct SessionCheckpoint {
  const Model* model;  // a checkpoint goes back into a session of the same model only
  KvCache::Snapshot kv;
  int64_t n_past;
  int64_t decode_step;
  std::vector<float> logits;
};

Session::Session(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
                 const SessionOptions& options)
    : model_(std::move(model)), pool_(std::move(pool)), options_(options) {
  const ModelConfig& c = model_->config();
  n_ctx_ = options.n_ctx > 0 ? options.n_ctx : std::min(c.n_ctx_train, kDefaultMaxContext);
  if (options.n_batch <= 0) fail("batch size must be positive, got {}", options.n_batch);
  init_blas_single_threaded();
  const KvCacheTypes types{kv_cache_type_from_name(options.cache_type_k), kv_cache_type_from_name(options.cache_type_v)};
  const int64_t batch = std::min(options.n_batch, n_ctx_);
  // The cache reserves address space for the whole context (pages come as entries do),
  // the forward pass its scratch for `batch` tokens: a context beyond the machine fails
  // here, and says which session and how big.
  const auto what = [&] {
    const int64_t entry_bytes = dtype_row_bytes(types.keys, c.head_dim) + dtype_row_bytes(types.values, c.head_dim);
    const double kv_bytes = static_cast<double>(c.n_layer * c.n_head_kv) * static_cast<double>(n_ctx_) *
                            static_cast<double>(entry_bytes);
    return fmt::format("a session of {} tokens for '{}' (a full KV cache of {:.1f} MiB at {}/{}, scratch for {} tokens)",
                       n_ctx_, model_->path(), kv_bytes / (1 << 20), options.cache_type_k, options.cache_type_v,
                       batch);
  };
  naming_allocation(what, [&] {
    cache_ = std::make_unique<KvCache>(c.n_layer, c.n_head_kv, c.head_dim, n_ctx_, types);
    forward_ = std::make_unique<ForwardPass>(c, model_->weights(), batch, n_ctx_, *pool_);
    logits_.resize(static_cast<size_t>(c.n_vocab) * (options.all_logits ? batch : 1));
  });
  host_ = std::make_unique<Host>(*this);
  decode_layer_done_ = [this](int64_t layer) { decode_layer_done(layer); };
}

Session::~Session() = default;

const float* Session::last_logits() const {
  return logits_.data() + logits_.size() - static_cast<size_t>(model_->config().n_vocab);
}

const char* session_phase_name(SessionPhase phase) {
  switch (phase) {
    case SessionPhase::kIdle: return "idle";
    case SessionPhase::kAttaching: return "attaching a press";
    case SessionPhase::kPrefilling: return "prefilling a prompt";
    case SessionPhase::kPromptComplete: return "done with a prompt's forward pass, before its end";
    case SessionPhase::kPromptEnd: return "at a prompt's end (the press's kPromptEnd)";
    case SessionPhase::kCapability: return "running a press capability";
    case SessionPhase::kQuestion: return "feeding a question";
    case SessionPhase::kDecoding: return "decoding a token";
  }
  return "in an unknown phase";
}

SessionPhase Session::phase() const {
  static_assert(std::is_same_v<std::variant_alternative_t<size_t(SessionPhase::kIdle), Phase>, Idle> &&
                std::is_same_v<std::variant_alternative_t<size_t(SessionPhase::kAttaching), Phase>, Attaching> &&
                std::is_same_v<std::variant_alternative_t<size_t(SessionPhase::kPrefilling), Phase>, Prefilling> &&
                std::is_same_v<std::variant_alternative_t<size_t(SessionPhase::kPromptComplete), Phase>, PromptComplete> &&
                std::is_same_v<std::variant_alternative_t<size_t(SessionPhase::kPromptEnd), Phase>, PromptEnd> &&
                std::is_same_v<std::variant_alternative_t<size_t(SessionPhase::kCapability), Phase>, Capability> &&
                std::is_same_v<std::variant_alternative_t<size_t(SessionPhase::kQuestion), Phase>, Question> &&
                std::is_same_v<std::variant_alternative_t<size_t(SessionPhase::kDecoding), Phase>, Decoding> &&
                std::variant_size_v<Phase> == 8);
  return static_cast<SessionPhase>(phase_.index());
}

void Session::expect_phase(const char* call, std::initializer_list<SessionPhase> allowed) const {
  const SessionPhase now = phase();
  if (std::find(allowed.begin(), allowed.end(), now) == allowed.end()) {
    fail("{} is not allowed while the session is {}", call, session_phase_name(now));
  }
}

void Session::check_input(const std::vector<int32_t>& tokens, const char* what) const {
  if (tokens.empty()) fail("nothing to prefill: the {} has no tokens", what);
  if (n_past_ + static_cast<int64_t>(tokens.size()) > n_ctx_) {
    fail("the {} has {} tokens, which do not fit in the context of {} ({} already used); "
         "raise the context size (n_ctx)", what, tokens.size(), n_ctx_, n_past_);
  }
  for (int32_t t : tokens) check_token(t);
}

void Session::prefill(const std::vector<int32_t>& tokens, int64_t question_tokens) {
  begin_prefill(tokens, question_tokens);
  while (!feed_prompt(tokens, std::numeric_limits<int64_t>::max())) {
  }
  end_prefill(tokens);
}

void Session::begin_prefill(const std::vector<int32_t>& tokens, int64_t question_tokens) {
  expect_phase("a prefill", {SessionPhase::kIdle});
  check_input(tokens, "prompt");
  if (question_tokens < 0 || question_tokens > static_cast<int64_t>(tokens.size())) {
    fail("a question of {} tokens in a prompt of {}", question_tokens, tokens.size());
  }
  if (press_) check_press_needs(static_cast<int64_t>(tokens.size()));
  phase_ = Prefilling{.first_position = n_past_};
  if (!press_) return;
  try {
    if (acts_at(PressPoint::kPromptBegin)) {
      press_->act({.point = PressPoint::kPromptBegin,
                   .first_position = n_past_,
                   .n_tokens = static_cast<int64_t>(tokens.size()),
                   .question_tokens = question_tokens},
                  *cache_);
    }
    // With a press the prompt runs layer by layer, each layer going to the press as soon as
    // the whole prompt has passed it, so that a one-shot press evicts it there, before the
    // next layer's entries arrive.
    const int64_t n_tokens = prepare_prompt_rows(tokens);
    forward_->begin_prompt(tokens.data(), positions_.data(), n_tokens, *cache_, options_.all_logits, logits_.data(),
                           PassPhase::kPrompt);
  } catch (...) {
    phase_ = Idle{};
    throw;
  }
}

bool Session::feed_prompt(const std::vector<int32_t>& tokens, int64_t layer_rows) {
  expect_phase("feeding a prompt", {SessionPhase::kPrefilling});
  auto& prompt = std::get<Prefilling>(phase_);
  const int64_t n_layer = model_->config().n_layer;
  bool done = false;
  try {
    ScopedTimer prefill(timings_.prefill_seconds);
    for (int64_t fed = 0; !done && fed < layer_rows;) {
      if (!press_) {
        // Batch by batch through every layer, holding no residual stream of the whole prompt.
        const size_t next = run_batch(tokens, prompt.next);
        fed += static_cast<int64_t>(next - prompt.next) * n_layer;
        prompt.next = next;
        done = next == tokens.size();
        continue;
      }
      const std::optional<int64_t> layer = forward_->run_prompt_chunk();
      fed += forward_->max_batch();
      if (layer) prompt_layer_done(*layer);
      done = !forward_->prompt_running();
    }
  } catch (...) {
    // The prompt's entries so far, in whichever layers took them.
    forward_->end_prompt();
    cache_->truncate(static_cast<int32_t>(prompt.first_position));
    n_past_ = prompt.first_position;
    phase_ = Idle{};
    throw;
  }
  if (!done) return false;
  // run_batch has moved n_past_ batch by batch; a layer-by-layer prompt moves it at its end.
  if (press_) n_past_ += static_cast<int64_t>(tokens.size());
  timings_.prefill_tokens += static_cast<int64_t>(tokens.size());
  decode_step_ = 0;
  phase_ = PromptComplete{.evicted = prompt.evicted};
  return true;
}

void Session::prompt_layer_done(int64_t layer) {
  if (!acts_at(PressPoint::kPromptLayerEnd)) return;
  auto& prompt = std::get<Prefilling>(phase_);
  const int64_t before = cache_->bytes_held();
  {
    // Timed as eviction, as if it ran after the prefill.
    ScopedTimer evict(timings_.eviction_seconds, &timings_.prefill_seconds);
    press_->act({.point = PressPoint::kPromptLayerEnd, .layer = layer}, *cache_);
  }
  prompt.evicted = prompt.evicted || cache_->bytes_held() < before;
}

void Session::end_prefill(const std::vector<int32_t>& tokens) {
  expect_phase("ending a prefill", {SessionPhase::kPromptComplete});
  const bool evicted = std::get<PromptComplete>(phase_).evicted;
  IdleOnExit<Phase> idle{phase_};
  if (!press_) return;
  phase_ = PromptEnd{.tokens = &tokens};
  // Run whether the press acts at the prompt's end or not: the cache is recorded when its
  // layer ends evicted.
  run_press_hook(0, [&] {
    if (acts_at(PressPoint::kPromptEnd)) press_->act({.point = PressPoint::kPromptEnd}, *cache_);
  }, evicted);
}

void Session::prefill_question(const std::vector<int32_t>& tokens) {
  expect_phase("a question", {SessionPhase::kIdle});
  if (n_past_ == 0) fail("a question follows a context: prefill the context first");
  check_input(tokens, "question");
  phase_ = Question{};
  IdleOnExit<Phase> idle{phase_};
  if (acts_at(PressPoint::kQuestion)) {
    press_->act({.point = PressPoint::kQuestion,
                 .first_position = n_past_,
                 .n_tokens = static_cast<int64_t>(tokens.size())},
                *cache_);
  }
  {
    ScopedTimer prefill(timings_.prefill_seconds);
    feed(tokens, PassPhase::kQuestion);
  }
  timings_.prefill_tokens += static_cast<int64_t>(tokens.size());
  decode_step_ = 0;
}

void Session::check_token(int32_t token) const {
  const int64_t n_vocab = model_->config().n_vocab;
  if (token < 0 || token >= n_vocab) fail("token id {} is out of the vocabulary (0..{})", token, n_vocab - 1);
}

// What the press declared at on_attach, checked before any point of the prefill runs.
int64_t Session::press_positions_after_prompt(int64_t n_tokens) const {
  return needs_.reserved_after_prompt + std::min(n_tokens, needs_.prompt_length_after_prompt);
}

void Session::check_press_needs(int64_t n_tokens) const {
  const int64_t rows = press_positions_after_prompt(n_tokens);
  if (rows > 0 && n_past_ + n_tokens + rows > n_ctx_) {
    fail("the prompt's {} tokens and the {} positions press '{}' runs after them do not fit in the context of {} ({} "
         "already used); raise the context size (n_ctx)", n_tokens, rows, press_->describe(), n_ctx_, n_past_);
  }
  if (!needs_.drafts) return;
  if (!draft_model_) fail("press '{}' needs a draft model (--draft-model)", press_->describe());
  if (n_past_ != 0 || options_.all_logits) {
    fail("press '{}' drafts for a session's first prompt only, without all_logits", press_->describe());
  }
}

void Session::feed(const std::vector<int32_t>& tokens, PassPhase phase) {
  if (!press_) {
    for (size_t begin = 0; begin < tokens.size();) begin = run_batch(tokens, begin);
    return;
  }
  const int64_t n_tokens = prepare_prompt_rows(tokens);
  try {
    forward_->run_prompt(tokens.data(), positions_.data(), n_tokens, *cache_, options_.all_logits, logits_.data(),
                         {}, phase);
  } catch (...) {
    cache_->truncate(static_cast<int32_t>(n_past_));  // the layers that took the prompt's entries
    throw;
  }
  n_past_ += n_tokens;
}

int64_t Session::prepare_prompt_rows(const std::vector<int32_t>& tokens) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (options_.all_logits) logits_.resize(static_cast<size_t>(n_tokens * model_->config().n_vocab));
  positions_.resize(static_cast<size_t>(n_tokens));
  for (int64_t i = 0; i < n_tokens; ++i) positions_[static_cast<size_t>(i)] = static_cast<int32_t>(n_past_ + i);
  return n_tokens;
}

size_t Session::run_batch(const std::vector<int32_t>& tokens, size_t begin) {
  const int64_t n_vocab = model_->config().n_vocab;
  if (options_.all_logits && begin == 0) logits_.resize(tokens.size() * static_cast<size_t>(n_vocab));
  const int64_t n = std::min<int64_t>(forward_->max_batch(), static_cast<int64_t>(tokens.size() - begin));
  positions_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions_[static_cast<size_t>(i)] = static_cast<int32_t>(n_past_ + i);
  const bool last = begin + static_cast<size_t>(n) == tokens.size();
  float* out = options_.all_logits ? logits_.data() + begin * static_cast<size_t>(n_vocab)
               : last              ? logits_.data()
                                   : nullptr;
  forward_->run(tokens.data() + begin, positions_.data(), n, *cache_, options_.all_logits, out);
  n_past_ += n;
  return begin + static_cast<size_t>(n);
}

void Session::set_draft_model(std::shared_ptr<const Model> draft) {
  if (draft) {
    const Tokenizer& a = model_->tokenizer();
    const Tokenizer& b = draft->tokenizer();
    if (a.n_vocab() != b.n_vocab()) {
      fail("the draft model's vocabulary has {} tokens, the model's {}: they must share a tokenizer", b.n_vocab(),
           a.n_vocab());
    }
    for (int32_t id = 0; id < a.n_vocab(); ++id) {
      if (a.token_text(id) != b.token_text(id)) {
        fail("the draft model's token {} is '{}', the model's '{}': they must share a tokenizer", id,
             b.token_text(id), a.token_text(id));
      }
    }
  }
  draft_model_ = std::move(draft);
}

void Session::decode(int32_t token) {
  double seconds = 0;
  const ForwardSegment segment = decode_segment(token);
  try {
    ScopedTimer pass(seconds);
    forward_->run(std::span(&segment, 1));
  } catch (...) {
    abandon_decode();
    throw;
  }
  end_decode(seconds);
}

ForwardSegment Session::decode_segment(const int32_t& token) {
  expect_phase("a decode step", {SessionPhase::kIdle});
  if (n_past_ + 1 > n_ctx_) fail("the context of {} tokens is full", n_ctx_);
  check_token(token);
  logits_.resize(static_cast<size_t>(model_->config().n_vocab));
  const int32_t& position = std::get<Decoding>(phase_ = Decoding{.position = static_cast<int32_t>(n_past_)}).position;
  return {.tokens = &token,
          .positions = &position,
          .n = 1,
          .cache = cache_.get(),
          .attention_tap = &forward_->attention_tap(),
          .residual_tap = &forward_->residual_tap(),
          .logits = logits_.data(),
          .phase = PassPhase::kDecode,
          .step = decode_step_ + 1,  // end_decode counts it
          .layer_done = acts_at(PressPoint::kDecodeLayerEnd) ? &decode_layer_done_ : nullptr};
}

void Session::decode_layer_done(int64_t layer) {
  auto& step = *std::get_if<Decoding>(&phase_);  // only a decode step's segment carries this callback
  const int64_t before = cache_->bytes_held();
  {
    ScopedTimer evict(timings_.eviction_seconds, &timings_.decode_seconds);  // timed as eviction
    press_->act({.point = PressPoint::kDecodeLayerEnd, .layer = layer, .step = decode_step_ + 1}, *cache_);
  }
  step.evicted = step.evicted || cache_->bytes_held() < before;
}

void Session::end_decode(double seconds) {
  expect_phase("ending a decode step", {SessionPhase::kDecoding});
  const bool evicted = std::get<Decoding>(phase_).evicted;
  IdleOnExit<Phase> idle{phase_};
  ++n_past_;
  timings_.decode_seconds += seconds;  // less the layers' evictions (decode_layer_done)
  ++timings_.decode_tokens;
  ++decode_step_;
  if (!press_) return;
  run_press_hook(decode_step_, [&] {
    if (acts_at(PressPoint::kDecodeStep)) press_->act({.point = PressPoint::kDecodeStep, .step = decode_step_}, *cache_);
  }, evicted);
}

void Session::abandon_decode() {
  if (phase() != SessionPhase::kDecoding) return;
  // The layers the pass got through hold the step's entry: taken back out, so that the next
  // step (at the same position) does not find it twice. A press that threw at the step's
  // layer end (a Python scorer's error) left the session usable so.
  cache_->truncate(static_cast<int32_t>(n_past_));
  phase_ = Idle{};
}

template <typename Hook>
void Session::run_press_hook(int64_t decode_step, Hook&& hook, bool evicted_before) {
  const int64_t before = cache_->bytes_held();
  {
    ScopedTimer evict(timings_.eviction_seconds);
    hook();
  }
  if (!evicted_before && cache_->bytes_held() >= before) return;
  EvictionRecord record{decode_step, n_past_, {}, {}, cache_->bytes_held()};
  for (int64_t l = 0; l < cache_->n_layer(); ++l) {
    record.layer_entries.push_back(cache_->entries(l));
    record.layer_bytes.push_back(cache_->layer_bytes(l));
  }
  last_eviction_ = std::move(record);
}

PressModelShape press_shape(const ModelConfig& c) {
  return {c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_embd, c.n_ff};
}

void Session::set_press(std::unique_ptr<Press> press) {
  expect_phase("set_press", {SessionPhase::kIdle});
  PressNeeds needs;
  if (press) {
    phase_ = Attaching{.needs = &needs};
    IdleOnExit<Phase> idle{phase_};
    const ModelConfig& c = model_->config();
    press->on_attach(press_shape(c), *host_);
    needs.points = press->points();  // read once: the session calls the press at these points only
  }
  // The press is in: its declarations take the place of the last press's.
  needs_ = std::move(needs);
  press_ = std::move(press);
  set_taps();
}

void Session::set_taps() {
  if (!press_) {
    forward_->set_attention_tap({});
    forward_->set_residual_tap({});
    return;
  }
  forward_->set_attention_tap([this](const AttentionEvent& event) {
    if (event.phase == PassPhase::kCapability) {  // timed as the press's lookahead
      const auto* observer = std::get<Capability>(phase_).observer;
      if (observer != nullptr) {
        (*observer)(event);
      } else {
        press_->on_attention(event);
      }
      return;
    }
    ScopedTimer capture(timings_.capture_seconds);
    press_->on_attention(event);
  });
  if (needs_.residual_observers.empty()) {
    forward_->set_residual_tap({});
    return;
  }
  forward_->set_residual_tap([this](const ResidualEvent& event) {
    if (phase() == SessionPhase::kCapability) {  // timed as the press's lookahead
      for (const auto& observe : needs_.residual_observers) observe(event);
      return;
    }
    ScopedTimer capture(timings_.capture_seconds);
    for (const auto& observe : needs_.residual_observers) observe(event);
  });
}

KvStats Session::kv_stats() const {
  const KvCache& kv = *cache_;
  KvStats stats{kv.n_layer(), kv.n_head_kv(), kv_cache_type_name(kv.types().keys), kv_cache_type_name(kv.types().values),
                kv.key_row_bytes(), kv.value_row_bytes(), kv.bytes_per_entry(), kv.bytes_held(), kv.peak_bytes(), {}, {}};
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    stats.layers.push_back({kv.entries(l), kv.layer_bytes(l), kv.layer_peak_bytes(l)});
    for (int64_t h = 0; h < kv.n_head_kv(); ++h) stats.entries.push_back(kv.length(l, h));
  }
  return stats;
}

// A greedy lookahead saves and restores the session at its prompt's end, besides clients
// between calls.
std::shared_ptr<const SessionCheckpoint> Session::checkpoint() const {
  expect_phase("checkpoint", {SessionPhase::kIdle, SessionPhase::kPromptEnd});
  return std::make_shared<const SessionCheckpoint>(
      SessionCheckpoint{model_.get(), cache_->snapshot(), n_past_, decode_step_, logits_});
}

void Session::rollback(const SessionCheckpoint& checkpoint) {
  expect_phase("rollback", {SessionPhase::kIdle, SessionPhase::kPromptEnd});
  if (checkpoint.model != model_.get()) fail("cannot roll back to a checkpoint of a session of another model");
  cache_->restore(checkpoint.kv);
  n_past_ = checkpoint.n_past;
  decode_step_ = checkpoint.decode_step;
  logits_ = checkpoint.logits;
}

void Session::truncate(int64_t n_past) {
  expect_phase("truncate", {SessionPhase::kIdle});
  if (n_past < 0 || n_past > n_past_) fail("cannot truncate a session of {} tokens to {}", n_past_, n_past);
  cache_->truncate(static_cast<int32_t>(n_past));
  n_past_ = n_past;
  decode_step_ = 0;
}

}  // namespace deferkv
