#include "deferkv/batch_engine.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "deferkv/error.h"
#include "engine/context_store.h"
#include "engine/generation_step.h"
#include "engine/kv_admission.h"
#include "engine/session_driver.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/forward_pass.h"

namespace deferkv {
namespace {

int64_t total_entries(const KvCache& kv) {
  int64_t n = 0;
  for (int64_t layer = 0; layer < kv.n_layer(); ++layer) n += kv.entries(layer);
  return n;
}

}  // namespace

struct BatchEngine::Sequence {
  SequenceId id = 0;
  SequenceRequest request;
  SequenceCallbacks callbacks;
  KvProjection projection;
  int64_t reserved = 0;  // guarded by mutex_
  std::atomic<bool> cancelled{false};
  std::atomic<int64_t> kv_bytes{0};  // its cache's bytes now, for stats()

  // The rest belongs to the thread that steps.
  bool pinned = false;  // guarded by mutex_: it holds its context in the store (ContextStore::pin)
  bool has_press = false;
  // Where its reservation stands: the peak, then (a press with a candidate pool, cut at the
  // prompt) the pool, then the budget once the press has evicted.
  enum class Reservation { kPeak, kPool, kEvicted };
  Reservation stage = Reservation::kPeak;  // written by the stepping thread under mutex_
  bool has_pool = false;  // the press cuts the prompt to a candidate pool first
  std::unique_ptr<Session> session;
  std::unique_ptr<Sampler> sampler;
  GenerateOptions generate;
  bool prefilled = false;            // the whole prompt is in
  std::optional<int32_t> to_decode;  // the token the next decode pass feeds
  GenerateResult result;
  bool done = false;
  SequenceOutcome outcome;  // once done
};

BatchEngine::BatchEngine(std::shared_ptr<const Model> model, std::shared_ptr<ThreadPool> pool,
                         const BatchEngineOptions& options)
    : model_(std::move(model)), pool_(std::move(pool)), options_(options) {
  if (options.max_sequences < 1) {
    fail("the number of sequences running at once (-np) must be at least 1, got {}", options.max_sequences);
  }
  if (options.kv_capacity_bytes <= 0) fail("the KV memory cap must be positive, got {}", options.kv_capacity_bytes);
  // A probe session (its cache is reserved, not committed) tells the context size and the
  // storage types' bytes.
  const Session probe(model_, pool_, options_.session);
  const KvCache& kv = kv_cache_of(probe);
  bytes_per_token_ = kv.bytes_per_entry() * kv.n_layer() * kv.n_head_kv();
  n_ctx_ = probe.n_ctx();
  forward_ = std::make_unique<ForwardPass>(model_->config(), model_->weights(), options.max_sequences, n_ctx_, *pool_);
  admission_ = std::make_unique<KvAdmission>(options.kv_capacity_bytes);
  contexts_ = options.context_dir.empty() ? std::make_unique<ContextStore>(*admission_)
                                          : std::make_unique<ContextStore>(*admission_, options.context_dir, model_);
}

BatchEngine::~BatchEngine() = default;

namespace {

// Refuses a request whose kind, context and press contradict each other; a context is
// compressed with nothing generated.
void check_kind(SequenceRequest& request) {
  if (request.kind == SequenceKind::kCompressContext) {
    if (request.context_id.empty()) fail("a context is compressed under an id: none was given");
    if (request.context) fail("a context is compressed from its tokens, not from another context");
    request.max_tokens = 0;
  } else if (!request.extend_context_id.empty() && !request.context) {
    fail("a sequence extends the compressed context it starts from: none was given");
  } else if (request.context && request.press) {
    fail("a sequence starts from a compressed context without a press: the context's ('{}') has done its work",
         request.context->press());
  }
}

}  // namespace

// What a request will hold of the KV memory at each stage: what its press declares (the
// points it evicts at, and `holding`, its Press::holding) over its prompt and new tokens,
// beside the copy of the context's rows it starts from.
KvProjection BatchEngine::project_request(const SequenceRequest& request, const PressHolding& holding,
                                          int64_t new_tokens) const {
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  int64_t kept = request.press == nullptr  ? -1
                 : request.budget.is_set() ? request.budget.resolve(prompt)
                                           : prompt;
  const bool evicts_each_layer = request.press != nullptr && request.press->points().evicts_each_prompt_layer();
  if (holding.kept >= 0) kept = holding.kept;
  KvProjection p =
      project_kv(bytes_per_token_, model_->config().n_layer, prompt, new_tokens, kept, evicts_each_layer, holding.pool);
  const int64_t context_bytes = request.context ? request.context->bytes() : 0;
  p.peak_bytes += context_bytes;
  p.after_pool += context_bytes;
  // A deferred context's copy is its pool (and its window's scores) until the question's
  // step d, then the budget the resumed press chooses from it.
  const DeferredEviction* deferred = request.context ? request.context->deferred() : nullptr;
  p.after_eviction +=
      deferred ? std::min(context_bytes, deferred->budget.resolve(deferred->prompt_end) * bytes_per_token_) : context_bytes;
  return p;
}

SequenceId BatchEngine::submit(SequenceRequest request, SequenceCallbacks callbacks) {
  auto s = std::make_shared<Sequence>();
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  // A sequence from a context holds a copy of its rows beside its question and tokens.
  const int64_t context_past = request.context ? request.context->n_past() : 0;
  const int64_t context_bytes = request.context ? request.context->bytes() : 0;
  check_kind(request);
  int64_t new_tokens =
      std::max<int64_t>(0, request.max_tokens < 0 ? n_ctx_ - context_past - prompt : request.max_tokens);
  // The context it starts from stays resident (pinned) beside its copy while it runs.
  int64_t pinned = 0;
  if (request.context && request.kind == SequenceKind::kGenerate) {
    std::lock_guard lock(mutex_);
    pinned = contexts_->bytes_of(request.context_id);
  }
  const PressHolding holding =
      request.press != nullptr ? request.press->holding(press_shape(model_->config()), prompt) : PressHolding{};
  s->has_pool = request.press != nullptr && request.press->points().evicts_each_prompt_layer() && holding.pool >= 0;
  auto project = [&] { return project_request(request, holding, new_tokens); };
  s->projection = project();
  // No limit asked: admission still reserves the worst case (up to the context's end, as the
  // cache may grow so far), but no more than the capacity could ever hold: the tokens past
  // that are given up rather than the request refused. Each generated token adds
  // bytes_per_token_ to the projection, whatever the press.
  if (request.max_tokens < 0 && s->projection.peak_bytes + pinned > admission_->capacity()) {
    const int64_t over = s->projection.peak_bytes + pinned - admission_->capacity();
    new_tokens = std::max<int64_t>(1, new_tokens - (over + bytes_per_token_ - 1) / bytes_per_token_);
    s->projection = project();
    request.max_tokens = new_tokens;
  }
  s->request = std::move(request);
  s->callbacks = std::move(callbacks);
  std::lock_guard lock(mutex_);
  if (stopping_) fail("the engine is shutting down");
  if (!admission_->can_ever_fit(s->projection.peak_bytes + pinned)) {
    fail("the request needs {} bytes of KV cache ({} prompt + {} new tokens{}) but the KV memory (--kv-memory) is "
         "{} bytes", s->projection.peak_bytes + pinned, prompt, new_tokens,
         context_bytes > 0 ? fmt::format(", its context's {} bytes twice: kept and copied", context_bytes) : "",
         admission_->capacity());
  }
  s->id = next_id_++;
  waiting_.push_back(s);
  work_.notify_all();
  return s->id;
}

void BatchEngine::cancel(SequenceId id) {
  std::lock_guard lock(mutex_);
  for (auto& s : waiting_) {
    if (s->id == id) s->cancelled = true;
  }
  for (auto& s : running_) {
    if (s->id == id) s->cancelled = true;
  }
  work_.notify_all();
}

void BatchEngine::cancel_all() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  for (auto& s : waiting_) s->cancelled = true;
  for (auto& s : running_) s->cancelled = true;
  work_.notify_all();
}

BatchEngineStats BatchEngine::stats() const {
  std::lock_guard lock(mutex_);
  BatchEngineStats st;
  st.running = static_cast<int64_t>(running_.size());
  st.waiting = static_cast<int64_t>(waiting_.size());
  for (const auto& s : running_) {
    st.kv_bytes_used += s->kv_bytes;
    if (s->stage == Sequence::Reservation::kPool) {
      ++st.pooled;
      st.kv_bytes_pooled += s->kv_bytes;
    }
  }
  st.kv_bytes_reserved = admission_->reserved();
  st.contexts_resident = contexts_->resident();
  st.context_bytes = contexts_->bytes();
  st.context_hits = contexts_->hits();
  st.context_misses = contexts_->misses();
  st.contexts_dropped = contexts_->dropped();
  st.contexts_spilled = contexts_->spilled();
  st.context_loads = contexts_->loads();
  st.kv_bytes_capacity = admission_->capacity();
  st.decode_steps = decode_steps_;
  st.decoded_rows = decoded_rows_;
  return st;
}

std::shared_ptr<const CompressedContext> BatchEngine::find_context(const std::string& id) {
  ContextStore::Found found;
  {
    std::lock_guard lock(mutex_);
    found = contexts_->lookup(id);
  }
  if (found.context || found.spilled_file.empty()) return found.context;
  // A spilled one is read on the caller's thread without the lock: the running sequences'
  // steps and other submits do not wait for the disk.
  std::shared_ptr<const CompressedContext> loaded = contexts_->load(found.spilled_file);
  std::lock_guard lock(mutex_);
  return contexts_->adopt(id, std::move(loaded));
}

std::optional<ResidentContext> BatchEngine::find_context_prefix(const std::vector<int32_t>& prompt,
                                                               const std::string& press,
                                                               const KvBudget& budget) {
  std::lock_guard lock(mutex_);
  return contexts_->longest_prefix(prompt, press, budget.describe());
}

std::optional<ResidentContext> BatchEngine::describe_context(const std::string& id) const {
  std::lock_guard lock(mutex_);
  return contexts_->describe(id);
}

std::vector<ResidentContext> BatchEngine::contexts() const {
  std::lock_guard lock(mutex_);
  return contexts_->list();
}

bool BatchEngine::remove_context(const std::string& id) {
  std::lock_guard lock(mutex_);
  const bool removed = contexts_->remove(id);
  work_.notify_all();  // its memory may admit a waiting sequence
  return removed;
}

bool BatchEngine::wait_for_work() {
  std::unique_lock lock(mutex_);
  work_.wait(lock, [&] { return !running_.empty() || !waiting_.empty() || stopping_; });
  return !running_.empty() || !waiting_.empty();
}

std::vector<std::shared_ptr<BatchEngine::Sequence>> BatchEngine::admit(std::vector<std::shared_ptr<Sequence>>& cancelled) {
  std::vector<std::shared_ptr<Sequence>> admitted;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->cancelled) {
      cancelled.push_back(*it);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  // First come, first served: one that does not fit at the front holds back the rest. Idle
  // contexts are dropped for it, least recently used first.
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < options_.max_sequences &&
         contexts_->make_room(waiting_.front()->projection.peak_bytes)) {
    std::shared_ptr<Sequence> s = waiting_.front();
    waiting_.pop_front();
    s->reserved = s->projection.peak_bytes;
    admission_->reserve(s->reserved);
    if (s->request.context && s->request.kind == SequenceKind::kGenerate) {
      s->pinned = contexts_->pin(s->request.context_id, s->request.context.get());
    }
    running_.push_back(s);
    admitted.push_back(s);
  }
  return admitted;
}

bool BatchEngine::step() {
  std::vector<std::shared_ptr<Sequence>> cancelled;
  std::vector<std::shared_ptr<Sequence>> admitted;
  {
    std::lock_guard lock(mutex_);
    admitted = admit(cancelled);
  }
  for (auto& s : cancelled) {
    s->outcome.cancelled = true;
    if (s->callbacks.on_finish) s->callbacks.on_finish(s->outcome);
  }
  for (auto& s : admitted) start(*s);
  // running_ changes on this thread only, so it is read here without the lock.
  for (auto& s : running_) {
    if (!s->done && s->cancelled) finish(*s);
  }
  const bool prefilled = prefill_step();
  const bool decoded = decode_all();
  const bool reaped = reap_finished();
  return !cancelled.empty() || !admitted.empty() || prefilled || decoded || reaped;
}

void BatchEngine::start(Sequence& s) {
  s.outcome.started = true;
  try {
    if (s.callbacks.on_start) s.callbacks.on_start();
    s.session = std::make_unique<Session>(model_, pool_, options_.session);
    // A deferred context brings its press, resumed by start_session: it evicts at step d.
    const bool deferred = s.request.context && s.request.context->deferred();
    s.has_press = s.request.press != nullptr || deferred;
    s.session->set_press(std::move(s.request.press));
    s.sampler = std::make_unique<Sampler>(s.request.sampling);
    s.generate.n_predict = s.request.max_tokens;
    s.generate.stop_at_end_of_generation = s.request.stop_at_end_of_generation;
    if (!s.request.context) {
      SessionDriver(*s.session).begin_prefill(s.request.prompt);
      return;
    }
    // From a context: its rows copied in and the question read at once, in this step, as
    // generate(session, context, question) reads it (a question is short beside a document;
    // the other sequences wait for it).
    const CompressedContext& context = *s.request.context;
    start_session(*s.session, context);
    if (deferred && context.kept_entries() < context.n_past() * model_->config().n_layer * model_->config().n_head_kv) {
      std::lock_guard lock(mutex_);
      s.stage = Sequence::Reservation::kPool;  // it holds the context's pool until step d (stats())
    }
    if (!s.request.prompt.empty()) s.session->prefill_question(s.request.prompt);
    for (int32_t t : context.tokens()) s.sampler->accept(t);
    for (int32_t t : s.request.prompt) s.sampler->accept(t);
    s.prefilled = true;
    after_forward(s);
    advance(s);
  } catch (const std::exception& e) {
    finish(s, e.what());
  }
}

bool BatchEngine::prefill_step() {
  // As much of one prompt as one batch through every layer: a press's prompt runs layer by
  // layer, each layer evicted once the whole prompt has passed it (Session::feed_prompt).
  const int64_t layer_rows = options_.session.n_batch * model_->config().n_layer;
  for (auto& s : running_) {
    const std::vector<int32_t>& prompt = s->request.prompt;
    if (s->done || s->prefilled) continue;
    try {
      SessionDriver driver(*s->session);
      s->prefilled = driver.feed_prompt(prompt, layer_rows);
      if (s->prefilled) {
        driver.end_prefill(prompt);
        after_forward(*s);
        if (s->request.kind == SequenceKind::kCompressContext) {
          s->outcome.context = CompressedContext::capture(*s->session, prompt);
          finish(*s);
          return true;
        }
        for (int32_t t : prompt) s->sampler->accept(t);
        advance(*s);
      } else {
        after_forward(*s);
      }
    } catch (const std::exception& e) {
      finish(*s, e.what());
    }
    return true;
  }
  return false;
}

bool BatchEngine::decode_all() {
  std::vector<ForwardSegment> segments;
  std::vector<Sequence*> batch;
  for (auto& s : running_) {
    if (s->done || !s->to_decode) continue;
    try {
      segments.push_back(SessionDriver(*s->session).decode_segment(*s->to_decode));
      batch.push_back(s.get());
    } catch (const std::exception& e) {
      finish(*s, e.what());
    }
  }
  if (batch.empty()) return false;
  const auto start = std::chrono::steady_clock::now();
  try {
    forward_->run(segments);
  } catch (const std::exception& e) {
    for (Sequence* s : batch) finish(*s, e.what());
    return true;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard lock(mutex_);
    ++decode_steps_;
    decoded_rows_ += static_cast<int64_t>(batch.size());
  }
  for (Sequence* s : batch) {
    try {
      SessionDriver(*s->session).end_decode(seconds);
      after_forward(*s);
      advance(*s);
    } catch (const std::exception& e) {
      finish(*s, e.what());
    }
  }
  return true;
}

void BatchEngine::advance(Sequence& s) {
  if (s.request.logprobs >= 0 && s.callbacks.on_logprobs) {
    // The logits the token was sampled from are still the session's last ones here.
    const auto on_token = [&s](int32_t token) {
      s.callbacks.on_logprobs(token_logprobs(s.session->last_logits(), s.session->model().config().n_vocab, token,
                                             s.request.logprobs));
      return !s.callbacks.on_token || s.callbacks.on_token(token);
    };
    s.to_decode = next_token_to_decode(*s.session, *s.sampler, s.generate, s.result, on_token);
  } else {
    s.to_decode = next_token_to_decode(*s.session, *s.sampler, s.generate, s.result, s.callbacks.on_token);
  }
  if (!s.to_decode || s.cancelled) finish(s);
}

void BatchEngine::after_forward(Sequence& s) {
  s.kv_bytes = kv_cache_of(*s.session).bytes_held();
  using Reservation = Sequence::Reservation;
  const auto& eviction = s.session->last_eviction();
  if (!s.has_press || s.stage == Reservation::kEvicted || !eviction.has_value()) return;
  // A pooled press's cut at the prompt leaves its pool; its eviction after a decode step
  // leaves its budget.
  const bool to_pool = s.has_pool && eviction->decode_step == 0;
  if (to_pool && s.stage == Reservation::kPool) return;
  const int64_t keep = to_pool ? s.projection.after_pool : s.projection.after_eviction;
  std::lock_guard lock(mutex_);
  s.stage = to_pool ? Reservation::kPool : Reservation::kEvicted;  // read by stats()
  if (keep < s.reserved) {
    admission_->release(s.reserved - keep);
    s.reserved = keep;
  }
}

void BatchEngine::finish(Sequence& s, const std::string& error) {
  s.done = true;
  s.to_decode.reset();
  SequenceOutcome& o = s.outcome;
  o.result = std::move(s.result);
  o.cancelled = s.cancelled;
  o.error = error;
  if (!s.request.extend_context_id.empty() && error.empty() && !s.cancelled && s.session) {
    // The turn as the session read it: the question and the answer tokens decoded (all of
    // them at max_tokens; not the end-of-generation token, nor a last one sampled but never
    // fed, as when a stop string ends the answer).
    const CompressedContext& base = *s.request.context;
    const int64_t fed = s.session->n_past() - base.n_past() - static_cast<int64_t>(s.request.prompt.size());
    std::vector<int32_t> turn = s.request.prompt;
    const int64_t answered = std::clamp<int64_t>(fed, 0, static_cast<int64_t>(o.result.tokens.size()));
    turn.insert(turn.end(), o.result.tokens.begin(), o.result.tokens.begin() + answered);
    try {
      o.context = CompressedContext::extend(*s.session, base, turn);
    } catch (const std::exception& e) {
      o.error = e.what();
    }
  }
  if (o.context) {
    // A new context's file (--context-dir) is written here, on the stepping thread without
    // the engine's lock, before reap_finished() keeps it: a context whose file cannot be
    // written (a full disk) fails its own request.
    const std::string& id =
        s.request.kind == SequenceKind::kCompressContext ? s.request.context_id : s.request.extend_context_id;
    try {
      contexts_->write(id, *o.context);
    } catch (const std::exception& e) {
      o.context.reset();
      o.error = e.what();
    }
  }
  if (s.session) {
    const KvCache& kv = kv_cache_of(*s.session);
    o.kv_entries_kept = total_entries(kv);
    o.kv_bytes = kv.bytes_held();
    o.kv_peak_bytes = kv.peak_bytes();
    o.timings = s.session->timings();
    s.session.reset();  // frees its KV
  }
  s.kv_bytes = 0;
}

bool BatchEngine::reap_finished() {
  std::vector<std::shared_ptr<Sequence>> finished;
  {
    std::lock_guard lock(mutex_);
    for (auto it = running_.begin(); it != running_.end();) {
      if ((*it)->done) {
        Sequence& s = **it;
        admission_->release(s.reserved);
        if (s.pinned) contexts_->unpin(s.request.context_id, s.request.context.get());
        // A new context takes over part of the memory its sequence held; idle ones make room
        // for it when that was not enough (its rows, with their positions, can exceed the
        // projection of a ragged allocation by a little).
        if (s.outcome.context) {  // its file, with a context directory, is written (finish())
          contexts_->make_room(s.outcome.context->bytes());
          // The budget goes with it for --context-reuse: an extension's is its base's.
          const bool made = s.request.kind == SequenceKind::kCompressContext;
          contexts_->insert(made ? s.request.context_id : s.request.extend_context_id, s.outcome.context,
                            made ? s.request.budget.describe() : contexts_->budget_of(s.request.context_id));
        }
        finished.push_back(*it);
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Last, so whoever learns of the end from on_finish sees the sequence gone from stats().
  for (auto& s : finished) {
    if (s->callbacks.on_finish) s->callbacks.on_finish(s->outcome);
  }
  return !finished.empty();
}

}  // namespace deferkv
