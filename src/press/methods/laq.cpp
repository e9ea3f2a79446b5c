// LAQ, Lookahead Q-Cache [docs/methods/laq.md]: prompt queries are a poor proxy for the
// queries of the answer, so LAQ generates a few pseudo answer tokens first and scores
// the full prompt with their queries.
//  1. Stage 1: SnapKV (window 32, max-pool) compresses a working copy of the cache.
//  2. n_lookahead greedy decode steps run on that copy (the session's lookahead; it
//     stops early at end of generation); their queries are kept.
//  3. The full cache is put back and scored by the last local_window prompt queries
//     followed by the pseudo queries, softmax over the prompt keys only; max-pooled, each
//     KV head keeps its top b - local_window plus the last local_window prompt tokens.
// laq has local_window 0, laqpp (LAQ++) 8. Departures: scores are per KV head (mean
// over the group) like the rest of the engine (the reference repeats K/V per query
// head); prompt rows see their causal prefix (the reference's triangular mask hides a
// few keys near the window, which it notes as harmless).
#include <algorithm>

#include "deferkv/error.h"
#include "kv/kv_cache.h"
#include "observe/attention_observation.h"
#include "observe/attention_tap.h"
#include "press/core/pooling.h"
#include "press/core/prompt_press.h"
#include "press/core/window_scoring.h"
#include "press/registry.h"

namespace deferkv {
namespace {

// Query rows kept from the forward pass, with their positions.
struct QueryRows {
  std::vector<float> rows;  // [n x n_head * head_dim]
  std::vector<int32_t> positions;
};

class LaqPress final : public PromptPress {
 public:
  LaqPress(const PressParams& params, const KvBudget& budget, const WindowScoring& stage1, int64_t lookahead,
           int64_t local_window)
      : PromptPress(params, budget, protected_windows(stage1.window, local_window)), stage1_(stage1),
        lookahead_(lookahead), local_window_(local_window) {}

  PressPoints points() const override { return PromptPress::points().with(PressPoint::kPromptEnd); }
  void act(const PressAt& at, KvCache& cache) override {
    PromptPress::act(at, cache);
    if (at.point == PressPoint::kPromptBegin) {
      prompt_queries_.clear();
      pseudo_queries_.clear();
    }
    if (at.point == PressPoint::kPromptEnd) evict_after_lookahead(cache);
  }

  void on_attention(const AttentionEvent& event) override {
    if (!cuts_prompt()) return;
    shape_ = event.shape;
    pool_ = &event.pool;
    if (event.positions[0] >= prompt_end()) return;  // the lookahead's queries come through its observer
    keep_queries(event, prompt_end() - std::max(stage1_.window, local_window_), prompt_queries_);
  }

  // Compresses a working copy with stage 1, generates the pseudo answer on it, and scores
  // the full cache with the pseudo queries.
  void evict_after_lookahead(KvCache& cache) {
    if (!cuts_prompt()) return;
    host("runs a lookahead")
        .greedy_lookahead(
            lookahead_, [this](KvCache& working) { compress_stage1(working); },
            [this](const AttentionEvent& event) { keep_queries(event, 0, pseudo_queries_); });
    evict_with_pseudo_queries(cache);
  }

 private:
  // Stage 1 keeps its window in the working copy, the final eviction the local window.
  static ProtectedEntries protected_windows(int64_t window, int64_t local_window) {
    return {std::max(window, local_window),
            fmt::format("protected window entries (window={}, local_window={})", window, local_window),
            "the windows (window=N, local_window=N in the press's parameters)"};
  }

  // Appends the event's queries at positions >= first to store[layer].
  static void keep_queries(const AttentionEvent& event, int64_t first, std::vector<QueryRows>& store) {
    if (store.size() <= static_cast<size_t>(event.layer)) store.resize(static_cast<size_t>(event.layer) + 1);
    QueryRows& rows = store[static_cast<size_t>(event.layer)];
    const int64_t stride = event.shape.n_head * event.shape.head_dim;
    for (int64_t i = 0; i < event.n; ++i) {
      if (event.positions[i] < first) continue;
      rows.rows.insert(rows.rows.end(), event.queries + i * stride, event.queries + (i + 1) * stride);
      rows.positions.push_back(event.positions[i]);
    }
  }

  void compress_stage1(KvCache& cache) const {
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      const QueryRows& window = prompt_queries_[static_cast<size_t>(l)];
      const int64_t skip = static_cast<int64_t>(window.positions.size()) - stage1_.window;
      evict_layer(cache, l, {rows_from(window, skip)}, stage1_.window, stage1_.group);
    }
  }

  void evict_with_pseudo_queries(KvCache& cache) {
    for (int64_t l = 0; l < cache.n_layer(); ++l) {
      const QueryRows& window = prompt_queries_[static_cast<size_t>(l)];
      std::vector<QueryRows> observers = {rows_from(window, static_cast<int64_t>(window.positions.size()) - local_window_)};
      if (static_cast<size_t>(l) < pseudo_queries_.size()) observers.push_back(pseudo_queries_[static_cast<size_t>(l)]);
      evict_layer(cache, l, observers, local_window_, stage1_.group);
    }
    prompt_queries_.clear();
    pseudo_queries_.clear();
  }

  QueryRows rows_from(const QueryRows& rows, int64_t skip) const {
    const int64_t stride = shape_.n_head * shape_.head_dim;
    QueryRows out;
    out.rows.assign(rows.rows.begin() + skip * stride, rows.rows.end());
    out.positions.assign(rows.positions.begin() + skip, rows.positions.end());
    return out;
  }

  // Scores the layer's prompt entries with the observers' attention over the prompt
  // keys (summed over the observers, mean over each group), keeps each head's top
  // b - window older entries plus the last `window` prompt entries and every later one.
  void evict_layer(KvCache& cache, int64_t layer, const std::vector<QueryRows>& observers, int64_t window,
                   GroupReduction group) const {
    const int64_t n_kv = cache.n_head_kv();
    std::vector<KvHeadView> prompt_views;
    std::vector<std::vector<float>> scores(static_cast<size_t>(n_kv));
    for (int64_t g = 0; g < n_kv; ++g) {
      const int32_t* positions = cache.positions(layer, g);
      const int64_t prompt_entries = entries_before(positions, cache.length(layer, g), prompt_end());
      prompt_views.push_back({cache.keys(layer, g), cache.values(layer, g), positions, prompt_entries, 0, {}});
      scores[g].assign(static_cast<size_t>(prompt_entries), 0.0f);
    }
    const int64_t stride = shape_.n_head * shape_.head_dim;
    for (const QueryRows& q : observers) {
      if (q.positions.empty()) continue;
      observe_attention({q.rows.data(), stride, q.positions.data(), nullptr, static_cast<int64_t>(q.positions.size())},
                        shape_, prompt_views, RowReduction::kWeightedSum, group, scores, *pool_);
    }
    for (int64_t g = 0; g < n_kv; ++g) {
      const int64_t candidates = prompt_views[g].length - window;
      std::vector<float> s(scores[g].begin(), scores[g].begin() + std::max<int64_t>(0, candidates));
      cache.retain(layer, g,
                   top_k_then_range(pool_scores(s, stage1_.pooling, stage1_.kernel), budget_entries() - window,
                                    cache.length(layer, g)));
    }
  }

  WindowScoring stage1_;
  int64_t lookahead_, local_window_;
  AttentionShape shape_{};
  ThreadPool* pool_ = nullptr;
  std::vector<QueryRows> prompt_queries_;  // [layer]: the last prompt queries
  std::vector<QueryRows> pseudo_queries_;  // [layer]: the lookahead's queries
};

PressMethod laq_variant(const std::string& name, const std::string& local_window, const std::string& summary) {
  auto params = window_scoring_parameters(32, 7, Pooling::kMax);
  params.push_back({"n_lookahead", "8", "pseudo answer tokens generated on the stage-1 cache"});
  params.push_back({"local_window", local_window, "last prompt queries that join the pseudo queries (kept too)"});
  return {{name, summary, "Lookahead Q-Cache, arXiv 2505.20334", params},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            return std::make_unique<LaqPress>(p, b, read_window_scoring(p), p.get_int("n_lookahead", 1, 4096),
                                              p.get_int("local_window", 0, 1 << 20));
          },
          [](const PressParams&) { return PressRole{true, false, ExtraForward::kLookahead}; }};
}

}  // namespace

PressMethod laq_method() {
  return laq_variant("laq", "0", "pseudo queries from a greedy lookahead on a SnapKV-compressed copy rescore the prompt");
}

PressMethod laqpp_method() {
  return laq_variant("laqpp", "8", "LAQ++: LAQ whose observers also include the last 8 prompt queries");
}

}  // namespace deferkv
