#pragma once
// The transformer forward pass (llama / qwen2 / qwen3 families) for a batch of tokens
// against a KV cache, or for several sequences' tokens at once (segments), each against its
// own cache. Scratch buffers are allocated once, for the largest batch, and reused by every
// call; run_prompt's residual stream grows to the longest prompt.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>
#include <utility>

#include "deferkv/model_config.h"
#include "kernels/attention.h"
#include "kernels/rope.h"
#include "model/model_weights.h"
#include "observe/attention_tap.h"
#include "observe/lookahead_rows.h"
#include "observe/residual_tap.h"

namespace deferkv {

class KvCache;
class ThreadPool;

// Layer `layer` is done with the rows that ran it: their attention has run and been observed,
// and nothing later in the pass reads the layer's entries, so a press may evict them. A prompt
// run layer by layer reports each layer once the whole prompt has passed it (run_prompt,
// run_prompt_chunk); a segment that carries one hears of each layer right after its rows'
// attention there and its attention tap, while the layer's entries are still in the
// processor's caches (a decode step: PressPoint::kDecodeLayerEnd).
using LayerDone = std::function<void(int64_t layer)>;

// One sequence's rows in a forward pass of several: its tokens at their positions, appended
// to its own cache and attending over it alone; its taps see its rows only, as they would
// in a pass of their own.
struct ForwardSegment {
  const int32_t* tokens;
  const int32_t* positions;
  int64_t n;
  KvCache* cache;
  const AttentionTap* attention_tap = nullptr;  // null or empty: none
  const ResidualTap* residual_tap = nullptr;    // null or empty: none
  float* logits = nullptr;  // the last row's logits (every row's when all_logits); null: none
  bool all_logits = false;
  PassPhase phase = PassPhase::kPrompt;  // stamped on its attention events, with the step
  int64_t step = 0;
  const LayerDone* layer_done = nullptr;  // null or empty: none
};

class ForwardPass {
 public:
  ForwardPass(const ModelConfig& config, const ModelWeights& weights, int64_t max_batch,
              int64_t kv_capacity, ThreadPool& pool);

  // Runs n (<= max_batch) tokens at the given positions, appending their keys and
  // values to `cache`. Writes vocabulary logits to `logits`: for all n rows when
  // all_logits (n x n_vocab), else for the last row only; nothing when logits is null.
  // The pass's own taps (set_attention_tap, set_residual_tap) see these rows, as `phase`.
  void run(const int32_t* tokens, const int32_t* positions, int64_t n, KvCache& cache,
           bool all_logits, float* logits, PassPhase phase = PassPhase::kPrompt);
  // Runs every segment's rows in one pass (their total <= max_batch): each weight matrix
  // is read once for all of them; attention, cache and taps are each segment's own. When
  // every segment is one token (a batch's decode step), the rows go through the multi-row
  // matvec kernels, whose every row is bit for bit a single token's matvec: each row's
  // result is what a pass of its own gives.
  void run(std::span<const ForwardSegment> segments);

  // Runs a prompt of n tokens (any length) layer by layer: every chunk of max_batch tokens
  // through layer 0, then `layer_done(0)`, then every chunk through layer 1, and so on,
  // holding the prompt's residual stream (n x n_embd floats) between layers. Weights are
  // read once per layer and chunk, as run() chunk by chunk would; the keys, values, taps
  // and logits are exactly those of run() called on each chunk in turn (the same batches
  // through the same kernels), in another order: layer_done(l) may evict layer l, which no
  // later row reads. Logits as run()'s over the whole prompt: n x n_vocab when all_logits.
  using LayerDone = deferkv::LayerDone;
  void run_prompt(const int32_t* tokens, const int32_t* positions, int64_t n, KvCache& cache, bool all_logits,
                  float* logits, const LayerDone& layer_done, PassPhase phase = PassPhase::kPrompt);
  // run_prompt() in steps, so that a scheduler can run other passes between them (the batch
  // engine decodes its other sequences there): begin_prompt() takes run_prompt()'s
  // arguments, which must outlive the prompt, and each run_prompt_chunk() runs the next
  // chunk through the next layer, returning that layer when the chunk was its last. Between
  // the chunks this pass may run() other caches' rows; a second prompt waits for this one.
  void begin_prompt(const int32_t* tokens, const int32_t* positions, int64_t n, KvCache& cache, bool all_logits,
                    float* logits, PassPhase phase = PassPhase::kPrompt);
  std::optional<int64_t> run_prompt_chunk();
  bool prompt_running() const { return prompt_.cache != nullptr; }
  // Stops the prompt begun (its entries so far stay in its cache) and frees its residual stream.
  void end_prompt();

  // Runs rows [first, first + n) (n <= max_batch) of `rows` at the given positions: their
  // input embeddings stand in for token embeddings, and each layer's low-rank deltas are
  // added to its projections for these rows only. Appends their keys and values to
  // `cache`; computes no logits.
  void run_rows(const LookaheadRows& rows, int64_t first, const int32_t* positions, int64_t n,
                KvCache& cache, PassPhase phase = PassPhase::kCapability);

  int64_t max_batch() const { return max_batch_; }

  // Called after every layer's attention (empty: none).
  void set_attention_tap(AttentionTap tap) { tap_ = std::move(tap); }
  // Called after the last layer with the batch's final residual stream (empty: none).
  void set_residual_tap(ResidualTap tap) { residual_tap_ = std::move(tap); }
  const AttentionTap& attention_tap() const { return tap_; }
  const ResidualTap& residual_tap() const { return residual_tap_; }

 private:
  // Whether a projection's input is the one the previous projection took, unchanged since
  // (q, k and v of the same normalised rows; gate and up): gemm_int16 and matmul's GEMM
  // then reuse the tokens packed for that one.
  enum class Input { kNew, kSameAsLast };
  void linear(const WeightMatrix& w, const float* x, int64_t n, float* y, Input input = Input::kNew);
  // y = x W^T for n rows through the multi-row matvec kernels: each row bit for bit as
  // the single-token matvec gives it.
  void linear_by_matvec(const WeightMatrix& w, const float* x, int64_t n, float* y);
  // y = x W^T for n rows through the integer GEMM (gemm_int16.h), the quantised
  // activations packed once for every thread.
  void linear_by_int16_gemm(const WeightMatrix& w, const float* x, int64_t n, float* y, Input input);
  // The n rows of x (cols wide) as matmul's GEMM reads them (gemm_pack_tokens), packed
  // into packed_ on the pool unless it holds them already.
  const float* gemm_tokens(const float* x, int64_t n, int64_t cols, Input input);
  // Packs `tokens` into packed_ (`bytes` of it) on the pool, pack(first panel, panels,
  // packed_) a chunk of panels of panel_tokens each, unless input is kSameAsLast and
  // packed_ holds them already: for gemm_int16 and matmul's GEMM alike.
  struct PackedTokens;
  template <class Pack>
  void pack_tokens(const PackedTokens& tokens, Input input, size_t bytes, int64_t panel_tokens, const Pack& pack);
  // Calls product(rows, first, count) for rows [begin, end) of w as GGUF rows (row_stride
  // apart): in place, or for row groups copied back to GGUF rows in the thread's scratch a
  // few hundred KiB at a time (prefill's products read GGUF rows; decode reads the groups).
  template <class Product>
  void with_gguf_rows(const WeightMatrix& w, int64_t begin, int64_t end, int thread, const Product& product);
  // linear(), plus the delta of projection p when deltas are given.
  void project(const WeightMatrix& w, const LayerDeltas* deltas, Projection p, const float* x, int64_t n,
               float* y, Input input = Input::kNew);
  // x_ rows [first, first + n) = the tokens' embeddings.
  void embed(const int32_t* tokens, int64_t n, int64_t first);
  // out rows [0, n) = RMSNorm(x_ rows [first, first + n)) * weight.
  void normalize(const std::vector<float>& weight, int64_t first, int64_t n, float* out);
  // Every layer over the n rows in x_, the segments' rows one after the other; the deltas
  // of `rows` (may be null) apply to all of them.
  void run_layers(const int32_t* positions, int64_t n, std::span<const ForwardSegment> segments,
                  const LookaheadRows* rows);
  void attention_block(int64_t layer, int64_t n, std::span<const ForwardSegment> segments,
                       const LayerDeltas* deltas);
  // One segment's part of attention_block, its rows starting at row `first`; then its taps:
  // the attention tap, and layer_done.
  void attend(int64_t layer, const ForwardSegment& segment, int64_t first);
  // After the last layer: each segment's residual tap, then its logits.
  void finish(std::span<const ForwardSegment> segments);
  // Each segment's logits, from the final residual stream.
  void output_logits(std::span<const ForwardSegment> segments);
  // rope_ = the rotations of prompt rows [first, first + n) (run_prompt).
  void use_prompt_rope(int64_t first, int64_t n);
  void feed_forward_block(int64_t layer, int64_t n, const LayerDeltas* deltas);
  void add_bias(const std::vector<float>& bias, float* y, int64_t n, int64_t width);
  // x_ rows [0, n) += norm_ rows [0, n) (after the attention and feed-forward blocks).
  void add_residual(int64_t n);
  // fn(begin, end) over rows [0, n) that cost `row_work` operations each, on the pool in
  // chunks that repay a handoff (one row, a decode step, runs here). For the steps
  // between the projections: on one thread they held a two-thread prompt to 1.8x a
  // one-thread one (bench/README.md, "Prompts on two threads").
  template <class Fn>
  void for_rows(int64_t n, int64_t row_work, const Fn& fn);

  const ModelConfig& config_;
  const ModelWeights& weights_;
  ThreadPool& pool_;
  int64_t max_batch_;

  // The prompt begun (begin_prompt) and where it stands: the next chunk's first row and layer.
  struct PromptCursor {
    const int32_t* tokens = nullptr;
    const int32_t* positions = nullptr;
    int64_t n = 0;
    KvCache* cache = nullptr;  // null: no prompt running
    bool all_logits = false;
    float* logits = nullptr;
    PassPhase phase = PassPhase::kPrompt;
    int64_t layer = 0;
    int64_t first = 0;
  };
  PromptCursor prompt_;
  std::vector<float> stream_;  // the prompt's residual stream between layers
  RopeTable prompt_rope_;      // every prompt row's rotation
  std::vector<float> x_, norm_, q_, k_, v_, attn_out_, gate_, up_;
  std::vector<uint8_t> packed_;                    // activation packed for matvec (n rows in linear_by_matvec), gemm_int16 or matmul's GEMM
  // What packed_ holds for gemm_int16 or matmul's GEMM: the tokens' rows, count, width and
  // gemm_int16's block (0: matmul's float panels; none: x null).
  struct PackedTokens {
    const float* x = nullptr;
    int64_t n = 0, cols = 0, block = 0;
    bool operator==(const PackedTokens&) const = default;
  };
  PackedTokens packed_tokens_;
  std::vector<int32_t> positions_;                 // the segments' positions, concatenated
  std::vector<float> logits_scratch_;              // logits of several segments' rows
  bool rows_by_matvec_ = false;                    // during a pass whose segments are one token each
  std::vector<std::vector<float>> matmul_scratch_; // one per thread
  std::vector<std::vector<uint8_t>> gguf_rows_scratch_;  // one per thread: row groups as GGUF rows
  std::vector<float> delta_scratch_;               // low-rank deltas' [n x rank]
  std::vector<KvHeadView> kv_views_;
  AttentionScratch attention_scratch_;
  RopeTable rope_;
  Rotary rotary_;
  AttentionTap tap_;
  ResidualTap residual_tap_;
};

}  // namespace deferkv
