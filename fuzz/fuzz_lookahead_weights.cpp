// LookaheadKV weights (a GGUF file of lookahead embeddings and per-layer LoRA deltas,
// docs/lookaheadkv_weights.md). Asserts: only deferkv::Error escapes; weights that load
// are consistent (embedding rows of the base width, one entry per base layer, each
// delta's matrices of rank x in and out x rank, applicable to a row), and writing them
// out and reading them back gives the same weights, bit for bit.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "kernels/low_rank_delta.h"
#include "press/methods/lookaheadkv/lookahead_weights.h"

using namespace deferkv;

namespace {

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool same_delta(const LowRankDelta& x, const LowRankDelta& y) {
  return x.rank == y.rank && x.in == y.in && x.out == y.out &&
         std::memcmp(&x.scale, &y.scale, sizeof(float)) == 0 && same_floats(x.a, y.a) &&
         same_floats(x.b, y.b);
}

void check_consistent(const LookaheadWeights& w) {
  fuzz::require(w.rows.n_embd == w.base_n_embd && w.rows.n_embd > 0, "embeddings have the base width");
  fuzz::require(w.rows.embeddings.size() % static_cast<size_t>(w.rows.n_embd) == 0,
                "embeddings are whole rows");
  fuzz::require(static_cast<int64_t>(w.rows.layers.size()) == w.base_n_layer, "one entry per base layer");
  std::vector<float> scratch;
  for (const LayerDeltas& layer : w.rows.layers) {
    for (const LowRankDelta& d : layer) {
      if (d.empty()) continue;
      fuzz::require(d.a.size() == static_cast<size_t>(d.rank * d.in), "A is rank x in");
      fuzz::require(d.b.size() == static_cast<size_t>(d.out * d.rank), "B is out x rank");
      const std::vector<float> x(static_cast<size_t>(d.in), 1.0f);
      std::vector<float> y(static_cast<size_t>(d.out), 0.0f);
      add_low_rank_delta(d, x.data(), 1, y.data(), scratch);
    }
  }
}

void check_same(const LookaheadWeights& x, const LookaheadWeights& y) {
  bool same = x.base_architecture == y.base_architecture && x.base_n_embd == y.base_n_embd &&
              x.base_n_layer == y.base_n_layer && x.lora_rank == y.lora_rank &&
              std::memcmp(&x.lora_alpha, &y.lora_alpha, sizeof(float)) == 0 && x.targets == y.targets &&
              x.rows.n_embd == y.rows.n_embd && same_floats(x.rows.embeddings, y.rows.embeddings) &&
              x.rows.layers.size() == y.rows.layers.size();
  for (size_t l = 0; same && l < x.rows.layers.size(); ++l) {
    for (size_t p = 0; same && p < kProjectionCount; ++p) same = same_delta(x.rows.layers[l][p], y.rows.layers[l][p]);
  }
  fuzz::require(same, "weights written and read back are the same");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  const std::string path = scratch.write("input.gguf", fuzz::as_text(data, size));
  LookaheadWeights weights;
  if (!fuzz::accepts([&] { weights = load_lookahead_weights(path); })) return 0;
  check_consistent(weights);
  const std::string copy = scratch.path() + "/copy.gguf";
  fuzz::require(fuzz::accepts([&] { save_lookahead_weights(copy, weights); }), "weights that load can be written");
  LookaheadWeights again;
  fuzz::require(fuzz::accepts([&] { again = load_lookahead_weights(copy); }), "weights written read back");
  check_same(weights, again);
  return 0;
}
