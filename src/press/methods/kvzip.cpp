// KVzip [docs/methods/kvzip.md]: query-agnostic scores from context reconstruction. After the
// prefill the model is asked to repeat the context, in the prompt's own frame (its chat form
// when the prompt is in it), and the context is fed after the request, teacher-forced, in
// chunks: chunk i runs after the prompt as
//   request_i + closing + context[s_i, e_i)
// (request_0 "\n\nRepeat the previous context exactly.", later ones "\n\nRepeat the part of
// the previous context exactly, starting with" + the previous chunk's last 8 tokens), and its
// entries go before the next one runs. Every query of that input scores the chunk's entries:
// per query head the softmax over the sinks (the first min(n_sink, s_i) entries), the chunk's
// entries and the input's own keys (causal), as kvpress and the paper's code subsample them;
// an entry's score per KV head is its maximum over the group's query heads and the queries.
// The first n_sink entries are kept; the opening of the prompt's frame after them (BOS, a
// system turn, the user's header) scores 0, as in kvpress. The shared allocation then
// spends the budget: by default AdaKV's ranking over each layer's heads with no floor
// (alpha=0), which is kvpress's KVzip with layerwise=True; kvpress's default also ranks
// across layers, which the shared allocation does not offer [OUR FORMULATION].
// A scorer (ScoredPress) so that every allocation applies; like LookaheadKV it scores with
// forward passes it runs at the prompt's end, so the prompt stays whole in every layer until then.
#include <algorithm>
#include <string>

#include "deferkv/error.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/core/scored_press.h"
#include "press/registry.h"

namespace deferkv {
namespace {

constexpr const char* kFirstRequest = "\n\nRepeat the previous context exactly.";
constexpr const char* kNextRequest = "\n\nRepeat the part of the previous context exactly, starting with";
constexpr int64_t kPreviousTail = 8;  // tokens of the previous chunk that the next request quotes

class KvzipPress final : public ScoredPress {
 public:
  KvzipPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, int64_t chunk_size,
             int64_t n_sink)
      : ScoredPress(params, budget, std::move(parts)), chunk_size_(chunk_size), n_sink_(n_sink) {}

  // The requests are encoded once; the prefill is refused before it runs when the context
  // cannot hold the prompt, a request and a chunk after it.
  void on_attach(const PressModelShape& shape, PressHost& host) override {
    ScoredPress::on_attach(shape, host);
    first_request_ = host.encode_text(kFirstRequest);
    next_request_ = host.encode_text(kNextRequest);
    plain_closing_ = host.encode_text("\n");  // kvpress's closing without a chat template
    frames_ = host.prompt_frames();
    int64_t closing = std::ssize(plain_closing_);
    for (const PromptFrame& f : frames_) closing = std::max(closing, std::ssize(f.closing));
    host.reserve_after_prompt(std::max(std::ssize(first_request_), std::ssize(next_request_) + kPreviousTail) +
                              closing);
    host.reserve_prompt_length_after_prompt(chunk_size_);
  }

  // Every layer is scored by the reconstruction, which runs after the whole prompt.
  PressPoints points() const override {
    return ScoredPress::points().without(PressPoint::kPromptLayerEnd).with(PressPoint::kPromptEnd);
  }

  void act(const PressAt& at, KvCache& cache) override {
    // Only the tokens of this prefill can be repeated: entries before them would never be scored.
    if (at.point == PressPoint::kPromptBegin && at.first_position != 0) {
      fail("press '{}' compresses a session's first prompt only: its reconstruction repeats the prompt, and {} "
           "positions are already in the cache",
           description(), at.first_position);
    }
    if (at.point == PressPoint::kPromptBegin) scores_.clear();
    if (at.point == PressPoint::kPromptEnd && will_evict()) reconstruct(cache);
    ScoredPress::act(at, cache);
  }

 protected:
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    if (static_cast<int64_t>(scores_.size()) != layer.n_layer) {
      fail("internal: press '{}' scores layer {} without a reconstruction", description(), layer.layer);
    }
    return std::move(scores_[static_cast<size_t>(layer.layer)]);
  }

 private:
  // The chunk being repeated: the entries [begin, end) of the prompt, and the sinks its
  // softmax also runs over.
  struct Chunk {
    int64_t begin, end, sinks;
  };

  void reconstruct(const KvCache& cache) {
    PressHost& session = host("reconstructs the context");
    const std::vector<int32_t>& prompt = session.prompt_tokens();
    const auto t = std::ssize(prompt);
    // The prompt's frame: the first whose opening the prompt starts with (the chat form's,
    // then the plain one's BOS); none matches a prompt of bare ids, which is all text.
    int64_t text_begin = 0;
    const std::vector<int32_t>* closing = &plain_closing_;
    for (const PromptFrame& f : frames_) {
      if (std::ssize(f.opening) < t && std::equal(f.opening.begin(), f.opening.end(), prompt.begin())) {
        text_begin = std::ssize(f.opening);
        if (f.form == PromptFrame::Form::kChat) closing = &f.closing;
        break;
      }
    }
    scores_.assign(static_cast<size_t>(cache.n_layer()),
                   std::vector<std::vector<float>>(static_cast<size_t>(cache.n_head_kv()),
                                                   std::vector<float>(static_cast<size_t>(t), 0.0f)));
    for (int64_t begin = text_begin; begin < t; begin += chunk_size_) {
      const int64_t end = std::min(t, begin + chunk_size_);
      std::vector<int32_t> input = begin == text_begin ? first_request_ : next_request_;
      if (begin > text_begin) input.insert(input.end(), prompt.begin() + std::max(text_begin, begin - kPreviousTail),
                                           prompt.begin() + begin);
      input.insert(input.end(), closing->begin(), closing->end());
      input.insert(input.end(), prompt.begin() + begin, prompt.begin() + end);
      chunk_ = {begin, end, std::min(n_sink_, begin)};
      session.run_after_prompt(input, [this](const AttentionEvent& event) { observe(event); });
    }
  }

  // The batch's queries (all of the reconstruction input) against the sinks, the chunk and
  // the input's own entries so far, gathered as float32 rows: observe_attention's softmax
  // then runs over exactly those keys, causal by position.
  void observe(const AttentionEvent& event) {
    const auto n_kv = static_cast<int64_t>(event.kv.size());
    const int64_t d = event.shape.head_dim;
    const int64_t chunk = chunk_.end - chunk_.begin;
    std::vector<std::vector<float>> keys(static_cast<size_t>(n_kv));
    std::vector<std::vector<int32_t>> positions(static_cast<size_t>(n_kv));
    std::vector<KvHeadView> views(static_cast<size_t>(n_kv));
    std::vector<int64_t> from(static_cast<size_t>(n_kv), chunk_.sinks);
    std::vector<std::vector<float>> out(static_cast<size_t>(n_kv));
    for (int64_t g = 0; g < n_kv; ++g) {
      const KvHeadView& kv = event.kv[static_cast<size_t>(g)];
      const int64_t input_begin = entries_before(kv.positions, kv.length, prompt_end());
      const std::pair<int64_t, int64_t> ranges[] = {
          {0, chunk_.sinks}, {chunk_.begin, chunk_.end}, {input_begin, kv.length}};
      const int64_t n = chunk_.sinks + chunk + (kv.length - input_begin);
      std::vector<float>& k = keys[static_cast<size_t>(g)];
      std::vector<int32_t>& p = positions[static_cast<size_t>(g)];
      k.resize(static_cast<size_t>(n * d));
      p.clear();
      for (const auto& [b, e] : ranges) {
        kv.keys.to_f32(b, e - b, k.data() + std::ssize(p) * d);
        p.insert(p.end(), kv.positions + b, kv.positions + e);
      }
      const KvRows rows{.data = reinterpret_cast<const uint8_t*>(k.data()), .type = DType::F32, .head_dim = d};
      KvHeadView& view = views[static_cast<size_t>(g)];
      view.keys = view.values = rows;  // observe_attention reads the keys only
      view.positions = p.data();
      view.length = n;
      out[static_cast<size_t>(g)].assign(static_cast<size_t>(n), 0.0f);
    }
    const ObservedQueries queries{.queries = event.queries,
                                  .stride = event.shape.n_head * d,
                                  .positions = event.positions,
                                  .weights = nullptr,
                                  .m = event.n,
                                  .from = from.data()};
    observe_attention(queries, event.shape, views, RowReduction::kMax, GroupReduction::kMax, out, event.pool);
    auto& layer = scores_[static_cast<size_t>(event.layer)];
    for (int64_t g = 0; g < n_kv; ++g) {
      float* score = layer[static_cast<size_t>(g)].data() + chunk_.begin;
      const float* seen = out[static_cast<size_t>(g)].data() + chunk_.sinks;
      for (int64_t j = 0; j < chunk; ++j) score[j] = std::max(score[j], seen[j]);
    }
  }

  int64_t chunk_size_, n_sink_;
  std::vector<int32_t> first_request_, next_request_, plain_closing_;
  std::vector<PromptFrame> frames_;
  Chunk chunk_{};
  std::vector<std::vector<std::vector<float>>> scores_;  // [layer][g][prompt entry]
};

}  // namespace

PressMethod kvzip_method() {
  auto params = with_shared_parameters(
      {{"chunk_size", "2048", "context tokens repeated per reconstruction pass (kvpress; the paper's code: 2000)"},
       {"n_sink", "4", "first tokens always kept (and the reconstruction softmax's sinks)"}},
      {.alloc = AllocationKind::kAdaKv, .triggers = false});
  // kvpress's KVzip ranks without AdaKV's floor ("KVzip does not rely on safeguards").
  for (PressParameter& p : params) {
    if (p.name == "alpha") p.default_value = std::string(1, '0');
  }
  return {{"kvzip", "max attention each entry gets while the model repeats the context (query-agnostic; one extra "
                    "forward over the context)",
           "KVzip, arXiv 2505.23416", std::move(params)},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            const int64_t n_sink = p.get_int("n_sink", 0, 1 << 20);
            parts.selection.sinks = n_sink;
            return std::make_unique<KvzipPress>(p, b, std::move(parts), p.get_int("chunk_size", 1, 1 << 20), n_sink);
          },
          [](const PressParams&) { return PressRole{true, false, ExtraForward::kReconstruction}; }};
}

}  // namespace deferkv
