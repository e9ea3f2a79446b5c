#include "press/core/scored_press.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "deferkv/error.h"
#include "deferkv/model_readout.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"

namespace deferkv {

std::vector<std::vector<float>> LayerEviction::candidate_attention() const {
  std::vector<std::vector<float>> out;
  for (int64_t g = 0; g < n_head_kv(); ++g) {
    const std::vector<float>& a = prompt_attention[static_cast<size_t>(g)];
    out.emplace_back(a.begin(), a.begin() + candidates[g]);
  }
  return out;
}

bool CaptureConfig::observes(Observation::Queries queries) const {
  return std::any_of(observations.begin(), observations.end(),
                     [&](const Observation& o) { return o.queries == queries; });
}

int64_t CaptureConfig::count_of(Observation::Queries queries) const {
  for (const Observation& o : observations) {
    if (o.queries == queries) return o.count;
  }
  return 0;
}

ScoredPress::ScoredPress(const PressParams& params, const KvBudget& budget, ScoredParts parts)
    : PromptPress(params, budget, protected_window(parts.window)), parts_(std::move(parts)) {
  const int64_t window = parts_.window;
  // Budget rules (docs/budgets.md): the window is always kept, so a budget below it cannot
  // be met (PromptPress refuses it) and one equal to it selects nothing from the rest of
  // the prompt.
  if (!budget.is_ratio() && window > 0 && budget.resolve(0) == window) {
    spdlog::warn("the KV budget of {} entries per head is the protected window of '{}': it keeps the last {} "
                 "prompt tokens and selects nothing from the rest of the prompt",
                 window, description(), window);
  }
  // A pool count below a per-head budget is refused before anything runs (a ratio's budget
  // is known per prompt: begin_prompt).
  if (!budget.is_ratio() && budget.is_set()) parts_.pool.entries(budget.resolve(0), description());
  for (const Observation& o : parts_.capture.observations) {
    if (!o.weights.empty() && static_cast<int64_t>(o.weights.size()) != o.count) {
      fail("internal: {} window weights for a window of {}", o.weights.size(), o.count);
    }
  }
  if (parts_.pieces.kind == PromptPieces::Kind::kSegments && !budget.is_ratio()) {
    fail("press '{}': segment= keeps each segment's share of a compression ratio; give --kv-ratio, not a per-head "
         "budget",
         description());
  }
  if (parts_.ratio_of == RatioOf::kSeen && !budget.is_ratio()) {
    fail("press '{}': ratio_of=seen keeps a share of every token seen; give --kv-ratio, not a per-head budget",
         description());
  }
}

void ScoredPress::on_attach(const PressModelShape& shape, PressHost& host) {
  PromptPress::on_attach(shape, host);
  const AllocationRule& rule = parts_.allocation;
  if (rule.kind == AllocationKind::kCalibrated && static_cast<int64_t>(rule.layer_scores.size()) != shape.n_layer) {
    fail("the calibration profile of '{}' has {} layer scores; this model has {} layers", description(),
         rule.layer_scores.size(), shape.n_layer);
  }
  check_layer_ratios(rule, shape.n_layer, description());
  shape_ = shape;
  // W_O only; the residual stream is not observed (an empty observer).
  if (parts_.two_stage) readout_ = &host.read_model_output({});
}

void ScoredPress::set_window(int64_t window, std::vector<float> weights) {
  if (!weights.empty() && static_cast<int64_t>(weights.size()) != window) {
    fail("internal: {} window weights for a window of {}", weights.size(), window);
  }
  parts_.window = window;
  std::vector<Observation>& observations = parts_.capture.observations;
  std::erase_if(observations, [](const Observation& o) { return o.queries == Observation::Queries::kPromptWindow; });
  observations.push_back(Observation::prompt_window(window, std::move(weights)));
}

bool ScoredPress::will_evict() const {
  if (parts_.trigger.per_step()) return pending_;  // the cache may outgrow b while decoding
  return pending_ && cuts_prompt();
}

PressPoints ScoredPress::points() const {
  PressPoints points = PromptPress::points();
  // A candidate pool is cut at the prompt's layer ends too, before the deferred eviction.
  if (parts_.trigger.fires_at_prefill_end() || !parts_.pool.keeps_all()) {
    points = points.with(PressPoint::kPromptLayerEnd);
  }
  // Re-rotated keys: the session then continues after the kept entries, which it is told
  // at the prompt's end (a host capability; the layers were evicted at their ends).
  if (parts_.key_positions == KeyPositions::kRerotated) points = points.with(PressPoint::kPromptEnd);
  if (parts_.trigger.per_step() || parts_.trigger.delay() > 0) points = points.with(PressPoint::kDecodeLayerEnd);
  return points;
}

void ScoredPress::act(const PressAt& at, KvCache& cache) {
  PromptPress::act(at, cache);
  switch (at.point) {
    case PressPoint::kPromptBegin: return begin_prompt(at.first_position);
    case PressPoint::kPromptLayerEnd:
      return parts_.trigger.fires_at_prefill_end() ? evict_at(cache, 0, at.layer) : pool_layer(cache, at.layer);
    case PressPoint::kPromptEnd:
      for (int64_t l = 0; l < cache.n_layer(); ++l) evict_at(cache, 0, l);  // none left when evicted at layer ends
      if (renumbered_) continue_after_kept(cache);
      return;
    case PressPoint::kDecodeLayerEnd:
      if (parts_.trigger.fires_after(at.step)) evict_at(cache, at.step, at.layer);
      return;
    case PressPoint::kQuestion:
    case PressPoint::kDecodeStep: return;
  }
}

void ScoredPress::continue_after_kept(const KvCache& cache) {
  renumbered_ = false;
  // Every head was renumbered from 0 and keeps the same count: the next token follows them.
  int64_t n = 0;
  for (int64_t l = 0; l < cache.n_layer(); ++l) {
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) n = std::max(n, cache.length(l, g));
  }
  host("re-rotates keys").continue_at(n);
}

void ScoredPress::begin_prompt(int64_t first_position) {
  if (budget().is_ratio() && prompt_end() > parts_.window && budget_entries() <= parts_.window) {
    spdlog::warn("{} of a {}-token prompt is {} entries per head, not more than the {}-entry window of '{}': "
                 "only the window is kept",
                 budget().describe(), prompt_end(), budget_entries(), parts_.window, description());
  }
  pending_ = true;
  evicted_layers_ = 0;
  selector_.reset();
  // Per step, the attention drawn so far carries over to the next prompt of the session.
  if (!(parts_.trigger.per_step() && parts_.capture.observes(Observation::Queries::kDecodeAll))) {
    prompt_attention_.clear();
  }
  decode_attention_.assign(static_cast<size_t>(parts_.capture.count_of(Observation::Queries::kDecodeSteps)), {});
  prompt_first_ = first_position;
  pool_entries_ = parts_.pool.entries(budget_entries(), description());
  pooled_layers_ = 0;
  pool_selector_.reset();
}

PressHolding ScoredPress::holding(const PressModelShape&, int64_t prompt_tokens) const {
  PressHolding h;
  if (!parts_.pool.keeps_all()) h.pool = parts_.pool.entries(budget().resolve(prompt_tokens), description());
  // alloc=per_layer keeps int(T (1 - r_l)) in layer l whatever the budget: at most the mean's.
  if (const auto& ratios = parts_.allocation.layer_ratios;
      parts_.allocation.kind == AllocationKind::kPerLayer && !ratios.empty()) {
    double kept = 0;
    for (double r : ratios) kept += static_cast<double>(prompt_tokens) * (1 - r);
    h.kept = std::min(prompt_tokens, static_cast<int64_t>(std::ceil(kept / static_cast<double>(ratios.size()))));
  }
  return h;
}

bool ScoredPress::defers_to_context() const {
  return resumes_from_captures() && parts_.trigger.delay() > 0 && !parts_.trigger.per_step();
}

std::optional<DeferredEviction> ScoredPress::deferred_eviction() const {
  // Right after the prefill: every layer pooled (or none, the whole prompt waiting), no
  // decode step captured, no eviction begun.
  const bool after_prefill = pending_ && evicted_layers_ == 0 && prompt_first_ == 0 &&
                             std::all_of(decode_attention_.begin(), decode_attention_.end(),
                                         [](const auto& step) { return step.empty(); });
  if (!defers_to_context() || !after_prefill) return std::nullopt;
  DeferredEviction state{budget(), prompt_end(), {}, {}};
  for (int64_t l = 0; l < shape_.n_layer; ++l) {
    for (int64_t g = 0; g < shape_.n_head_kv; ++g) {
      auto& positions = state.positions.emplace_back();
      auto& scores = state.scores.emplace_back();
      if (static_cast<size_t>(l) >= prompt_attention_.size()) continue;  // nothing captured: nothing to cut
      const CapturedAttention& c = prompt_attention_[static_cast<size_t>(l)];
      if (static_cast<size_t>(g) >= c.values.size()) continue;
      // One score per position (CapturedAttention::fit keeps them so), matched again by
      // position when the resumed press first fits them to its session's heads.
      positions = c.positions[g];
      scores = c.values[g];
      if (scores.size() != positions.size()) {
        fail("internal: '{}' captured {} scores for {} entries", description(), scores.size(), positions.size());
      }
    }
  }
  return state;
}

void ScoredPress::resume_deferred(const DeferredEviction& state) {
  if (!defers_to_context()) return Press::resume_deferred(state);  // refuses
  const auto heads = static_cast<size_t>(shape_.n_layer * shape_.n_head_kv);
  if (state.positions.size() != heads || state.scores.size() != heads) {
    fail("press '{}' resumes a deferred eviction of {} heads on a model of {} layers x {} KV heads", description(),
         state.positions.size(), shape_.n_layer, shape_.n_head_kv);
  }
  if (state.budget.describe() != budget().describe()) {
    fail("press '{}' with budget {} resumes a deferred eviction made with budget {}", description(),
         budget().describe(), state.budget.describe());
  }
  resume_prompt(state.prompt_end);
  begin_prompt(0);
  pooled_layers_ = shape_.n_layer;  // the pool was cut in the prefill that exported this
  prompt_attention_.assign(static_cast<size_t>(shape_.n_layer), {});
  for (int64_t l = 0; l < shape_.n_layer; ++l) {
    CapturedAttention& c = prompt_attention_[static_cast<size_t>(l)];
    for (int64_t g = 0; g < shape_.n_head_kv; ++g) {
      const size_t i = static_cast<size_t>(l * shape_.n_head_kv + g);
      if (state.positions[i].size() != state.scores[i].size()) {
        fail("press '{}': a deferred eviction's head {} has {} positions and {} scores", description(), i,
             state.positions[i].size(), state.scores[i].size());
      }
      c.positions.push_back(state.positions[i]);
      c.values.push_back(state.scores[i]);
    }
    // A version above any head's, and after the restore that filled the heads (version 0
    // would count every entry as refilled since): the first fit matches the scores to the
    // entries by position (CapturedAttention::fit).
    c.versions.assign(c.values.size(), ~uint64_t{0});
  }
}

bool ScoredPress::pools_prompt() const {
  return pool_entries_ > 0 && will_evict() && prompt_outgrows(prompt_end(), pool_entries_, parts_.window);
}

void ScoredPress::pool_layer(KvCache& cache, int64_t l) {
  if (l != pooled_layers_) fail("internal: '{}' pools layer {} after {} layers", description(), l, pooled_layers_);
  ++pooled_layers_;
  if (!pools_prompt()) return;
  const int64_t n_layer = cache.n_layer();
  if (l == 0) {
    prompt_attention_.resize(static_cast<size_t>(n_layer));
    pool_selector_.emplace(parts_.selection);
  }
  // The pool is the method's own choice at the prompt's end with a budget of P: the same
  // candidates (the window and the sinks are kept), allocation and selection.
  CapturedAttention& prompt = prompt_attention_[static_cast<size_t>(l)];
  if (parts_.capture.captures_anything()) match_to_cache(prompt, cache, l);
  const std::vector<std::vector<std::vector<float>>> no_decode;
  const LayerEviction view{l, n_layer, prompt_end(), decode_origin(), pool_entries_, parts_.window,
                           candidate_counts(cache, l, parts_.window), prompt.values, no_decode, cache};
  std::vector<std::vector<float>> scores = pool_score(view);
  const std::vector<std::vector<int32_t>> dropped = choose(view, scores, *pool_selector_);
  for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
    if (dropped[g].empty()) continue;
    cache.erase(l, g, dropped[g]);
    // The prompt window's capture follows the entries kept: step d's score reads it.
    if (parts_.capture.captures_anything()) {
      prompt.follow_erase(static_cast<size_t>(g), dropped[g], cache.version(l, g), true);
    }
  }
}

namespace {

// The captured layer for `event`, created when first seen.
template <typename Store>
auto& layer_of(Store& store, const AttentionEvent& event) {
  if (store.size() <= static_cast<size_t>(event.layer)) store.resize(static_cast<size_t>(event.layer) + 1);
  return store[static_cast<size_t>(event.layer)];
}

}  // namespace

void ScoredPress::capture_rows(const AttentionEvent& event, int64_t skip, const float* weights,
                               CapturedAttention& into) const {
  for (size_t g = 0; g < event.kv.size(); ++g) into.fit(g, event.kv[g]);
  observe_attention(observed_rows(event, skip, weights), event.shape, event.kv, parts_.capture.rows,
                    parts_.capture.group, into.values, event.pool);
}

void ScoredPress::on_attention(const AttentionEvent& event) {
  if (parts_.key_positions == KeyPositions::kRerotated && rotary_ == nullptr) {
    if (event.rotary.n_rot <= 0) fail("press '{}' re-rotates keys, but this model has no RoPE", description());
    rotary_ = &event.rotary;
  }
  if (!will_evict()) return;
  const int64_t position = event.positions[0];
  // Decode step 1 is the first token after the question in question-agnostic mode, whose
  // rows are neither prompt nor decode observers.
  if (position >= prompt_end() && position < decode_origin()) return;
  const int64_t step = position < prompt_end() ? 0 : position - decode_origin() + 1;  // 0: the prompt
  for (const Observation& o : parts_.capture.observations) capture(o, event, step);
}

void ScoredPress::capture(const Observation& o, const AttentionEvent& event, int64_t step) {
  using Queries = Observation::Queries;
  switch (o.queries) {
    case Queries::kPromptWindow:
    case Queries::kPromptAll:
      if (step == 0) capture_prompt(o, event);
      return;
    case Queries::kDecodeSteps:
      if (step > 0 && step <= o.count) capture_rows(event, 0, nullptr, layer_of(decode_attention_[step - 1], event));
      return;
    case Queries::kDecodeAll:
      if (step > 0) capture_rows(event, 0, nullptr, layer_of(prompt_attention_, event));
      return;
    case Queries::kTriggerStep:
      if (step > 0 && parts_.trigger.fires_after(step)) {
        CapturedAttention& layer = layer_of(prompt_attention_, event);
        layer.forget();
        capture_rows(event, event.n - 1, nullptr, layer);
      }
      return;
  }
}

void ScoredPress::capture_prompt(const Observation& o, const AttentionEvent& event) {
  const bool all = o.queries == Observation::Queries::kPromptAll;
  const int64_t window_start = prompt_end() - o.count;
  const int64_t first_observed = all ? prompt_first_ : window_start;
  // The batch's rows have consecutive positions; the observed ones are a suffix.
  const int64_t skip = std::clamp<int64_t>(first_observed - event.positions[0], 0, event.n);
  const int64_t m = event.n - skip;
  if (m <= 0 || (!all && o.count == 0)) return;
  std::vector<float> weights(static_cast<size_t>(m), 1.0f);
  if (!all) {
    for (int64_t i = 0; i < m; ++i) {
      const int64_t age_index = event.positions[skip + i] - window_start;  // 0: the oldest window query
      weights[i] = o.weights.empty() ? 1.0f / static_cast<float>(o.count) : o.weights[age_index];
    }
  }
  capture_rows(event, skip, weights.data(), layer_of(prompt_attention_, event));
}

void ScoredPress::match_to_cache(CapturedAttention& captured, const KvCache& cache, int64_t l) const {
  // A head never observed scores 0.
  for (int64_t g = 0; g < cache.n_head_kv(); ++g) captured.fit(static_cast<size_t>(g), cache.view(l, g));
}

int64_t ScoredPress::budget_at(int64_t step) const {
  if (parts_.ratio_of == RatioOf::kPrompt) return budget_entries();
  // kvpress counts the tokens seen as the newest position + 1: the prompt and every step.
  const auto seen = static_cast<double>(step == 0 ? prompt_end() : decode_origin() + step);
  return std::max<int64_t>(1, static_cast<int64_t>(seen * (1.0 - budget().compression_ratio())));
}

std::vector<int64_t> ScoredPress::candidate_counts(const KvCache& cache, int64_t l, int64_t window) const {
  std::vector<int64_t> out;
  for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
    const int32_t* positions = cache.positions(l, g);
    const int64_t len = cache.length(l, g);
    if (parts_.trigger.per_step()) {
      out.push_back(std::max<int64_t>(0, len - window));  // all but the newest entries
    } else {  // the prompt entries before its window
      out.push_back(entries_before(positions, len, prompt_end() - window));
    }
  }
  return out;
}

std::vector<std::vector<int32_t>> ScoredPress::choose(const LayerEviction& layer,
                                                      std::vector<std::vector<float>>& scores,
                                                      LayerSelector& selector) const {
  // The sinks are kept without asking; the other candidates share what is left of b.
  const int64_t room = std::max<int64_t>(0, layer.budget - layer.window);
  const int64_t sinks = std::min(parts_.selection.sinks, room);
  // The pyramid's shape comes from the prompt's candidates, not from what a candidate pool left
  // (a pool's top layers hold a pyramid of P: shaped on them, step d's pyramid turned over
  // and kept whole pools there, over the budget). Per-step evictions read the cache's.
  const int64_t prompt_candidates =
      parts_.trigger.per_step() ? 0 : std::max<int64_t>(0, prompt_end() - layer.window - sinks);
  LayerShare share{layer.layer, layer.n_layer, room - sinks, layer.budget, layer.window + sinks, {}, prompt_candidates};
  HeadScores rest;
  std::vector<int64_t> head_sinks;
  for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
    const int64_t c = layer.candidates[g];
    if (static_cast<int64_t>(scores[g].size()) < c) fail("internal: {} scores for {} candidates", scores[g].size(), c);
    head_sinks.push_back(std::min(sinks, c));
    rest.push_back(std::span<const float>(scores[g]).subspan(head_sinks[g], c - head_sinks[g]));
    share.candidates.push_back(c - head_sinks[g]);
  }
  const std::vector<int64_t> counts = allocate(parts_.allocation, share, rest);
  if (parts_.two_stage) {
    std::vector<float> w_o(static_cast<size_t>(readout_->n_embd() * shape_.n_head * shape_.head_dim));
    readout_->attention_output(layer.layer, w_o.data());
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const std::vector<float> norms = projected_value_norms(layer.cache, layer.layer, g, layer.candidates[g], w_o,
                                                             readout_->n_embd(), shape_.n_head);
      const auto s = head_sinks[g];
      two_stage_rescore(std::span<float>(scores[g]).subspan(s, layer.candidates[g] - s), counts[g],
                        std::span<const float>(norms).subspan(s), *parts_.two_stage);
    }
  }
  std::vector<std::vector<int32_t>> dropped = selector.dropped(layer.layer, rest, counts);
  for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
    for (int32_t& j : dropped[g]) j += static_cast<int32_t>(head_sinks[g]);
  }
  return dropped;
}

void ScoredPress::evict_at(KvCache& cache, int64_t step, int64_t l) {
  if (will_evict()) evict_layer(cache, step, l);
  if (l == cache.n_layer() - 1) end_eviction();
}

void ScoredPress::end_eviction() {
  if (!will_evict()) {
    pending_ = false;
    return;
  }
  evicted_layers_ = 0;
  selector_.reset();
  decode_attention_.assign(decode_attention_.size(), {});
  // Per step, keep_captured has kept or forgotten each layer's capture for the next step.
  if (!parts_.trigger.per_step()) {
    prompt_attention_.clear();
    pending_ = false;
  }
}

void ScoredPress::evict_layer(KvCache& cache, int64_t step, int64_t l) {
  if (l != evicted_layers_) fail("internal: '{}' evicts layer {} after {} layers", description(), l, evicted_layers_);
  const int64_t n_layer = cache.n_layer();
  if (l == 0) {
    prompt_attention_.resize(static_cast<size_t>(n_layer));
    for (auto& s : decode_attention_) s.resize(static_cast<size_t>(n_layer));
    selector_.emplace(parts_.selection);
  }
  const int64_t b = budget_at(step);
  const int64_t window = parts_.trigger.per_step() ? std::min(parts_.window, b) : parts_.window;
  CapturedAttention& prompt = prompt_attention_[l];
  if (parts_.capture.captures_anything()) match_to_cache(prompt, cache, l);
  std::vector<std::vector<std::vector<float>>> decode;
  for (auto& s : decode_attention_) {
    match_to_cache(s[l], cache, l);
    decode.push_back(std::move(s[l].values));  // a decode step's capture serves one eviction
  }
  const LayerEviction view{l, n_layer, prompt_end(), decode_origin() + step, b, window, candidate_counts(cache, l, window),
                           prompt.values, decode, cache};
  std::vector<std::vector<int32_t>> dropped;
  if (parts_.pieces.kind == PromptPieces::Kind::kWhole) {
    std::vector<std::vector<float>> scores = score(view);
    dropped = choose(view, scores, *selector_);
  } else if (l >= parts_.allocation.skip_layers) {
    // The prompt in pieces (its one eviction, at the prefill's end): the sinks and the
    // window stay, the pieces share the rest of b per head. A skipped layer keeps all.
    const int64_t room = std::max<int64_t>(0, b - window);
    const int64_t sinks = std::min(parts_.selection.sinks, room);
    std::vector<int64_t> head_sinks;
    for (int64_t c : view.candidates) head_sinks.push_back(std::min(sinks, c));
    dropped = dropped_by_pieces(parts_.pieces, view, head_sinks, room - sinks, budget().compression_ratio(),
                                [this](const LayerEviction& piece) { return score(piece); });
  } else {
    dropped.resize(static_cast<size_t>(cache.n_head_kv()));
  }
  for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
    if (dropped[g].empty()) continue;
    // A decode step drops few entries of a long head: their rows wait as holes
    // (KvCache::erase_lazily), so a per-step press does not move the head every step.
    if (step > 0) {
      cache.erase_lazily(l, g, dropped[g]);
    } else {
      cache.erase(l, g, dropped[g]);
    }
  }
  if (parts_.key_positions == KeyPositions::kRerotated) {
    if (rotary_ == nullptr) fail("internal: '{}' re-rotates keys before any attention event", description());
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) cache.renumber(l, g, 0, *rotary_);
    renumbered_ = true;
  }
  keep_captured(cache, l, dropped);
  ++evicted_layers_;
}

void ScoredPress::keep_captured(const KvCache& cache, int64_t l, const std::vector<std::vector<int32_t>>& dropped) {
  for (auto& s : decode_attention_) s[static_cast<size_t>(l)] = {};
  CapturedAttention& c = prompt_attention_[static_cast<size_t>(l)];
  if (!parts_.trigger.per_step()) {
    c = {};  // once: done with
    return;
  }
  if (!parts_.capture.captures_anything()) return;
  // The capture was matched to the cache's entries, so it drops the same indices and stays
  // matched to the head's new version. The scores follow the entries kept, to be added to
  // (H2O) or reused at the next step, or are scored afresh by the next step's query.
  for (size_t g = 0; g < dropped.size(); ++g) {
    c.follow_erase(g, dropped[g], cache.version(l, static_cast<int64_t>(g)),
                   !parts_.capture.observes(Observation::Queries::kTriggerStep));
  }
}

std::vector<PressParameter> with_shared_parameters(std::vector<PressParameter> own, const SharedDefaults& defaults) {
  for (const auto& group :
       {allocation_parameters(AllocationKey::kAlloc, defaults.alloc), selection_parameters(defaults.chunk)}) {
    own.insert(own.end(), group.begin(), group.end());
  }
  if (defaults.triggers) {
    own.push_back(delay_parameter("0"));
    own.push_back(candidate_pool_parameter("all"));
    for (const auto& p : per_step_parameters(defaults.per_step)) own.push_back(p);
    own.push_back(ratio_of_parameter());
  }
  if (defaults.pieces) {
    for (const auto& p : piece_parameters()) own.push_back(p);
  }
  return own;
}

PressParameter rerotation_parameter(bool default_on) {
  return {"rerotate", default_on ? "true" : "false",
          "after the prompt's eviction, renumber the kept entries 0..n-1, re-rotating their keys (RoPE); "
          "decoding continues at n"};
}

KeyPositions read_key_positions(const PressParams& params, const ScoredParts& parts) {
  if (!params.has("rerotate") || !params.get_bool("rerotate")) return KeyPositions::kOriginal;
  if (!parts.trigger.fires_at_prefill_end() || parts.trigger.per_step()) {
    fail("press '{}': rerotate renumbers the entries once, at the end of the prefill; it cannot take d, per_step "
         "or every",
         params.name());
  }
  if (parts.allocation.kind != AllocationKind::kUniform) {
    fail("press '{}': rerotate needs every head to keep the same number of entries (alloc=uniform), so that the "
         "next token's position follows every head",
         params.name());
  }
  return KeyPositions::kRerotated;
}

ScoredParts read_scored_parts(const PressParams& params) {
  ScoredParts parts;
  parts.allocation = read_allocation(params, params.has("alloc") ? AllocationKey::kAlloc : AllocationKey::kBase);
  parts.selection = read_selection(params);
  parts.trigger = read_trigger(params);
  parts.key_positions = read_key_positions(params, parts);
  parts.ratio_of = read_ratio_of(params, parts.trigger);
  parts.pieces = read_prompt_pieces(params);
  if (parts.pieces.kind != PromptPieces::Kind::kWhole) {
    // Each piece keeps a count per head of its own: no other allocation or selection unit.
    if (!parts.trigger.fires_at_prefill_end() || parts.trigger.per_step()) {
      fail("press '{}': block= and segment= compress the prompt once, at the end of the prefill; they cannot take d, "
           "per_step or every",
           params.name());
    }
    if (parts.allocation.kind != AllocationKind::kUniform || parts.selection.chunk > 0) {
      fail("press '{}': block= and segment= keep the same count in every head, piece by piece; they cannot take "
           "alloc other than uniform, nor chunk=",
           params.name());
    }
  }
  parts.pool = read_candidate_pool(params, parts.trigger.delay() > 0 && !parts.trigger.per_step());
  // A ratio per layer keeps a share of the prompt whatever the budget: a pool at P would
  // be that same share.
  if (!parts.pool.keeps_all() && parts.allocation.kind == AllocationKind::kPerLayer) {
    fail("press '{}': alloc=per_layer keeps a share of each layer's prompt whatever the budget, so it cannot take a "
         "candidate pool (pool={})",
         params.name(), params.get_string("pool"));
  }
  // A method that declares the two stages' parameters selects in two stages (CriticalKV).
  if (params.has("first_stage_ratio")) {
    parts.two_stage = read_two_stage(params);
    if (parts.selection.chunk > 0) {
      fail("press '{}': the two stages choose entries per head, so they cannot take chunks shared by the heads",
           params.name());
    }
  }
  // A share of the head's entries at every step would shrink the head again at each one.
  if (parts.allocation.kind == AllocationKind::kPerLayer && parts.trigger.per_step()) {
    fail("press '{}': alloc=per_layer cuts each layer to its share of the prompt once; it cannot take per_step or "
         "every (each step would cut the share again)",
         params.name());
  }
  if (parts.selection.chunk > 0 &&
      (parts.allocation.kind == AllocationKind::kAdaKv || parts.allocation.kind == AllocationKind::kAdaPyramid)) {
    fail("press '{}': chunks are shared by every head of a layer, so they cannot take adakv's per-head budgets",
         params.name());
  }
  return parts;
}

namespace {

PressRole role_of(const PressParams& params, bool position_matched) {
  const Trigger trigger = read_trigger(params);
  PressRole role;
  role.evicts_generated = trigger.per_step();
  role.reads_the_cache_as_it_is = position_matched;
  role.evicts_at_prefill_end_only = !trigger.per_step() && trigger.fires_at_prefill_end();
  return role;
}

}  // namespace

PressRole scored_press_role(const PressParams& params) { return role_of(params, false); }
PressRole position_matched_press_role(const PressParams& params) { return role_of(params, true); }

}  // namespace deferkv
