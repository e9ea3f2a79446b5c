#include "deferkv/session.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <optional>
#include <utility>

#include "base/allocation_error.h"
#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/model_readout.h"
#include "deferkv/tokenizer.h"
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

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

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
}

Session::~Session() = default;

const float* Session::last_logits() const {
  return logits_.data() + logits_.size() - static_cast<size_t>(model_->config().n_vocab);
}

void Session::check_input(const std::vector<int32_t>& tokens, const char* what) const {
  if (tokens.empty()) fail("nothing to prefill: the {} has no tokens", what);
  if (n_past_ + static_cast<int64_t>(tokens.size()) > n_ctx_) {
    fail("the {} has {} tokens, which do not fit in the context of {} ({} already used); "
         "raise the context size (n_ctx)", what, tokens.size(), n_ctx_, n_past_);
  }
  for (int32_t t : tokens) check_token(t);
}

void Session::prefill(const std::vector<int32_t>& tokens) {
  begin_prefill(tokens);
  while (!feed_prompt(tokens, std::numeric_limits<int64_t>::max())) {
  }
  end_prefill(tokens);
}

void Session::begin_prefill(const std::vector<int32_t>& tokens) {
  check_input(tokens, "prompt");
  if (press_) check_press_needs(static_cast<int64_t>(tokens.size()));
  if (press_) press_->on_prefill_begin(n_past_, static_cast<int64_t>(tokens.size()));
  prompt_feed_ = {.first_position = n_past_};
  if (!press_) return;
  // With a press the prompt runs layer by layer, each layer going to the press as soon as
  // the whole prompt has passed it, so that a one-shot press evicts it there, before the
  // next layer's entries arrive.
  const int64_t n_tokens = prepare_prompt_rows(tokens);
  forward_->begin_prompt(tokens.data(), positions_.data(), n_tokens, *cache_, options_.all_logits, logits_.data());
}

bool Session::feed_prompt(const std::vector<int32_t>& tokens, int64_t layer_rows) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n_layer = model_->config().n_layer;
  double eviction_seconds = 0;
  bool done = false;
  try {
    for (int64_t fed = 0; !done && fed < layer_rows;) {
      if (!press_) {
        // Batch by batch through every layer, holding no residual stream of the whole prompt.
        const size_t next = run_batch(tokens, prompt_feed_.next);
        fed += static_cast<int64_t>(next - prompt_feed_.next) * n_layer;
        prompt_feed_.next = next;
        done = next == tokens.size();
        continue;
      }
      const std::optional<int64_t> layer = forward_->run_prompt_chunk();
      fed += forward_->max_batch();
      if (layer && prompt_feed_.layers_open) {
        const int64_t before = cache_->bytes_held();
        const auto evict_start = std::chrono::steady_clock::now();
        prompt_feed_.layers_open = press_->on_prefill_layer_end(*cache_, *layer);
        eviction_seconds += seconds_since(evict_start);
        prompt_feed_.evicted = prompt_feed_.evicted || cache_->bytes_held() < before;
      }
      done = !forward_->prompt_running();
      if (done) n_past_ += static_cast<int64_t>(tokens.size());
    }
  } catch (...) {
    // The prompt's entries so far, in whichever layers took them.
    forward_->end_prompt();
    cache_->truncate(static_cast<int32_t>(prompt_feed_.first_position));
    n_past_ = prompt_feed_.first_position;
    throw;
  }
  // The press's evictions are timed as eviction, as if they ran after the prefill.
  timings_.prefill_seconds += seconds_since(start) - eviction_seconds;
  timings_.eviction_seconds += eviction_seconds;
  if (done) {
    timings_.prefill_tokens += static_cast<int64_t>(tokens.size());
    decode_step_ = 0;
  }
  return done;
}

void Session::end_prefill(const std::vector<int32_t>& tokens) {
  if (!press_) return;
  struct Scope {
    const std::vector<int32_t>*& tokens;
    ~Scope() { tokens = nullptr; }
  } scope{prefill_tokens_ = &tokens};
  run_press_hook(0, [&] { press_->on_prefill_end(*cache_); }, prompt_feed_.evicted);
}

void Session::prefill_question(const std::vector<int32_t>& tokens) {
  if (n_past_ == 0) fail("a question follows a context: prefill the context first");
  check_input(tokens, "question");
  if (press_) press_->on_question(n_past_, static_cast<int64_t>(tokens.size()));
  feed_input(tokens);
}

void Session::feed_input(const std::vector<int32_t>& tokens) {
  const auto start = std::chrono::steady_clock::now();
  feed(tokens);
  timings_.prefill_seconds += seconds_since(start);
  timings_.prefill_tokens += static_cast<int64_t>(tokens.size());
  decode_step_ = 0;
}

void Session::check_token(int32_t token) const {
  const int64_t n_vocab = model_->config().n_vocab;
  if (token < 0 || token >= n_vocab) fail("token id {} is out of the vocabulary (0..{})", token, n_vocab - 1);
}

// What the press declared at on_attach, checked before any hook of the prefill runs.
void Session::check_press_needs(int64_t n_tokens) const {
  const int64_t rows = needs_.reserved_after_prompt;
  if (rows > 0 && n_past_ + n_tokens + rows > n_ctx_) {
    fail("the prompt's {} tokens and the {} lookahead rows of press '{}' do not fit in the context of {} ({} already "
         "used); raise the context size (n_ctx)", n_tokens, rows, press_->describe(), n_ctx_, n_past_);
  }
  if (!needs_.drafts) return;
  if (!draft_model_) fail("press '{}' needs a draft model (--draft-model)", press_->describe());
  if (n_past_ != 0 || options_.all_logits) {
    fail("press '{}' drafts for a session's first prompt only, without all_logits", press_->describe());
  }
}

void Session::feed(const std::vector<int32_t>& tokens) {
  if (!press_) {
    for (size_t begin = 0; begin < tokens.size();) begin = run_batch(tokens, begin);
    return;
  }
  const int64_t n_tokens = prepare_prompt_rows(tokens);
  try {
    forward_->run_prompt(tokens.data(), positions_.data(), n_tokens, *cache_, options_.all_logits, logits_.data(),
                         {});
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
  const auto start = std::chrono::steady_clock::now();
  const ForwardSegment segment = decode_segment(token);
  forward_->run(std::span(&segment, 1));
  end_decode(seconds_since(start));
}

ForwardSegment Session::decode_segment(const int32_t& token) {
  if (n_past_ + 1 > n_ctx_) fail("the context of {} tokens is full", n_ctx_);
  check_token(token);
  decode_position_ = static_cast<int32_t>(n_past_);
  logits_.resize(static_cast<size_t>(model_->config().n_vocab));
  decode_layers_ = {};
  return {&token, &decode_position_, 1, cache_.get(), &forward_->attention_tap(), &forward_->residual_tap(),
          logits_.data()};
}

void Session::end_decode(double seconds) {
  const DecodeLayers layers = std::exchange(decode_layers_, {});
  ++n_past_;
  timings_.decode_seconds += seconds - layers.eviction_seconds;  // timed as eviction
  ++timings_.decode_tokens;
  ++decode_step_;
  if (press_) run_press_hook(decode_step_, [&] { press_->on_decode_step(*cache_, decode_step_); }, layers.evicted);
}

template <typename Hook>
void Session::run_press_hook(int64_t decode_step, Hook&& hook, bool evicted_before) {
  const int64_t before = cache_->bytes_held();
  const auto start = std::chrono::steady_clock::now();
  hook();
  timings_.eviction_seconds += seconds_since(start);
  if (!evicted_before && cache_->bytes_held() >= before) return;
  EvictionRecord record{decode_step, n_past_, {}, {}, cache_->bytes_held()};
  for (int64_t l = 0; l < cache_->n_layer(); ++l) {
    record.layer_entries.push_back(cache_->entries(l));
    record.layer_bytes.push_back(cache_->layer_bytes(l));
  }
  last_eviction_ = std::move(record);
}

void Session::set_press(std::unique_ptr<Press> press) {
  PressNeeds needs;
  if (press) {
    struct Scope {
      PressNeeds*& attaching;
      ~Scope() { attaching = nullptr; }
    } scope{attaching_ = &needs};
    const ModelConfig& c = model_->config();
    press->on_attach({c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_embd, c.n_ff}, *host_);
  }
  // The press is in: its declarations take the place of the last press's.
  needs_ = std::move(needs);
  press_ = std::move(press);
  if (!press_) {
    forward_->set_attention_tap({});
    forward_->set_residual_tap({});
    return;
  }
  forward_->set_attention_tap([this](const AttentionEvent& event) {
    const auto start = std::chrono::steady_clock::now();
    if (capability_observer_ != nullptr) {  // timed as the press's lookahead
      (*capability_observer_)(event);
      return;
    }
    press_->on_attention(event);
    if (in_capability_) return;
    timings_.capture_seconds += seconds_since(start);
    // A decode segment's rows are its own decode_position_ (decode_segment); a prompt's or a
    // question's are not.
    if (event.positions == &decode_position_) {
      const int64_t before = cache_->bytes_held();
      const auto evict_start = std::chrono::steady_clock::now();
      press_->on_decode_layer_end(*cache_, event.layer, decode_step_ + 1);  // end_decode counts the step
      const double seconds = seconds_since(evict_start);
      timings_.eviction_seconds += seconds;
      decode_layers_.eviction_seconds += seconds;
      decode_layers_.evicted = decode_layers_.evicted || cache_->bytes_held() < before;
    }
  });
  if (needs_.residual_observers.empty()) {
    forward_->set_residual_tap({});
    return;
  }
  forward_->set_residual_tap([this](const ResidualEvent& event) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& observe : needs_.residual_observers) observe(event);
    if (!in_capability_) timings_.capture_seconds += seconds_since(start);
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

std::shared_ptr<const SessionCheckpoint> Session::checkpoint() const {
  return std::make_shared<const SessionCheckpoint>(
      SessionCheckpoint{model_.get(), cache_->snapshot(), n_past_, decode_step_, logits_});
}

void Session::rollback(const SessionCheckpoint& checkpoint) {
  if (checkpoint.model != model_.get()) fail("cannot roll back to a checkpoint of a session of another model");
  cache_->restore(checkpoint.kv);
  n_past_ = checkpoint.n_past;
  decode_step_ = checkpoint.decode_step;
  logits_ = checkpoint.logits;
}

void Session::truncate(int64_t n_past) {
  if (n_past < 0 || n_past > n_past_) fail("cannot truncate a session of {} tokens to {}", n_past_, n_past);
  cache_->truncate(static_cast<int32_t>(n_past));
  n_past_ = n_past;
  decode_step_ = 0;
}

}  // namespace deferkv
