#include "press/lookahead_test_util.h"

#include <filesystem>
#include <random>

#include "deferkv/model.h"
#include "press/press_test_util.h"

namespace deferkv::testing {
namespace {

std::vector<float> gaussian(int64_t n, float stddev, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& v : out) v = stddev * normal(rng);
  return out;
}

std::vector<std::vector<double>> to_rows(const std::vector<float>& values, int64_t cols) {
  std::vector<std::vector<double>> out;
  for (size_t begin = 0; begin < values.size(); begin += static_cast<size_t>(cols)) {
    out.emplace_back(values.begin() + static_cast<std::ptrdiff_t>(begin),
                     values.begin() + static_cast<std::ptrdiff_t>(begin) + cols);
  }
  return out;
}

}  // namespace

PressModelShape model_shape(const std::string& gguf_path) {
  const auto model = Model::load(gguf_path);
  const ModelConfig& c = model->config();
  return {c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_embd, c.n_ff};
}

LookaheadWeights random_lookahead_weights(const PressModelShape& shape, int64_t n_lookahead, int64_t rank,
                                          float b_scale, uint32_t seed) {
  std::mt19937 rng(seed);
  LookaheadWeights w;
  w.base_architecture = "llama";
  w.base_n_embd = shape.n_embd;
  w.base_n_layer = shape.n_layer;
  w.lora_rank = rank;
  w.lora_alpha = 2.0f * static_cast<float>(rank);
  w.targets = {Projection::kQ, Projection::kK, Projection::kV, Projection::kO,
               Projection::kGate, Projection::kUp, Projection::kDown};
  w.rows.n_embd = shape.n_embd;
  w.rows.embeddings = gaussian(n_lookahead * shape.n_embd, 1.0f, rng);
  w.rows.layers.resize(static_cast<size_t>(shape.n_layer));
  for (auto& layer : w.rows.layers) {
    for (Projection p : w.targets) {
      const auto [in, out] = projection_widths(p, shape);
      layer[static_cast<size_t>(p)] = {rank, in, out, w.lora_alpha / static_cast<float>(rank),
                                       gaussian(rank * in, 0.3f, rng), gaussian(out * rank, b_scale, rng)};
    }
  }
  return w;
}

ReferenceRows reference_rows(const LookaheadWeights& weights) {
  ReferenceRows rows;
  rows.embeddings = to_rows(weights.rows.embeddings, weights.rows.n_embd);
  for (const LayerDeltas& layer : weights.rows.layers) {
    std::array<ReferenceDelta, 7> deltas;
    for (size_t p = 0; p < kProjectionCount; ++p) {
      const LowRankDelta& d = layer[p];
      if (d.empty()) continue;
      deltas[p] = {to_rows(d.a, d.in), to_rows(d.b, d.rank), d.scale};
    }
    rows.deltas.push_back(std::move(deltas));
  }
  return rows;
}

std::string press_test_lookahead_weights_path() {
  const std::string path = press_test_model_path() + "-lookahead-n6-r4.gguf";
  if (!std::filesystem::exists(path)) {
    save_lookahead_weights(path, random_lookahead_weights(model_shape(press_test_model_path()), 6, 4, 0.2f, 17));
  }
  return path;
}

}  // namespace deferkv::testing
