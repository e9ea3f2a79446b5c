// Q-Filters [docs/methods/qfilter.md] (Godey et al., arXiv 2503.02812; kvpress QFilterPress):
// queries of one head mostly point along one direction, found offline per model; a key's
// projection on it estimates the attention it will draw, so each KV head keeps the b
// entries of largest -<f, k_j>, f the head's filter (the sign is the published filters':
// kvpress scores -(q_filter * keys).sum(-1)). The filters are a file made for the model:
// filters=PATH, the safetensors file (or the folder holding model.safetensors) that
// kvpress downloads from the hub, tensor "q_filters" of shape [layers, KV heads, head_dim].
// No attention is read; every key the head holds is a candidate (no window), as in kvpress.
// [OUR FORMULATION] the file's head dimensions are permuted for a GGUF llama's interleaved
// RoPE (press/core/trained_tensors.h; dim_order=model reads them as they are).
#include <memory>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "kernels/rope.h"
#include "kv/kv_cache.h"
#include "observe/attention_tap.h"
#include "press/core/scored_press.h"
#include "press/core/trained_tensors.h"
#include "tensor/safetensors_file.h"

namespace deferkv {
namespace {

constexpr const char* kQFiltersFile = "Q-Filters file";

TrainedTensor load_filters(const std::string& path) {
  if (path.empty()) fail("press 'qfilter' needs filters=PATH (the model's Q-Filters safetensors file)");
  std::unique_ptr<SafetensorsFile> file;
  try {
    file = std::make_unique<SafetensorsFile>(trained_safetensors_path(path));
  } catch (const Error& e) {
    fail("cannot read the {} '{}': {}", kQFiltersFile, path, e.what());
  }
  return read_trained_tensor(*file, kQFiltersFile, "q_filters", 3);
}

class QFilterPress final : public ScoredPress {
 public:
  QFilterPress(const PressParams& params, const KvBudget& budget, ScoredParts parts, std::string path,
               TrainedTensor filters, HeadDimOrder order)
      : ScoredPress(params, budget, std::move(parts)), path_(std::move(path)), filters_(std::move(filters)),
        order_(order) {}

  // Filters trained for another model are refused before anything runs.
  void on_attach(const PressModelShape& shape, PressHost& host) override {
    ScoredPress::on_attach(shape, host);
    const std::vector<int64_t> want = {shape.n_layer, shape.n_head_kv, shape.head_dim};
    static const char* const names[] = {"layers", "KV heads", "head_dim"};
    for (size_t i = 0; i < want.size(); ++i) {
      if (filters_.shape[i] != want[i]) {
        fail("{} '{}': q_filters has shape [{}, {}, {}] (layers, KV heads, head_dim), but the model has {} {}", kQFiltersFile,
             path_, filters_.shape[0], filters_.shape[1], filters_.shape[2], want[i], names[i]);
      }
    }
  }

  // The model's RoPE style decides the filters' dimension order (trained_tensors.h).
  void on_attention(const AttentionEvent& event) override {
    interleaved_ = event.rotary.interleaved;
    ScoredPress::on_attention(event);
  }

 protected:
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    const int64_t d = layer.cache.head_dim();
    std::vector<std::vector<float>> scores(static_cast<size_t>(layer.n_head_kv()));
    std::vector<double> f(static_cast<size_t>(d));
    for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
      const float* filter = filters_.values.data() + (layer.layer * layer.n_head_kv() + g) * d;
      for (int64_t m = 0; m < d; ++m) f[m] = filter[file_head_dim(m, d, order_, interleaved_)];
      KvRowReader key(layer.cache.keys(layer.layer, g));
      for (int64_t j = 0; j < layer.candidates[g]; ++j) {
        const float* k = key(j);
        double dot = 0;
        for (int64_t m = 0; m < d; ++m) dot += f[m] * k[m];
        scores[g].push_back(static_cast<float>(-dot));
      }
    }
    return scores;
  }

 private:
  std::string path_;
  TrainedTensor filters_;  // [layer][KV head][head_dim], the file's dimension order
  HeadDimOrder order_;
  bool interleaved_ = false;
};

}  // namespace

PressMethod qfilter_method() {
  return {{"qfilter", "keep the keys of largest -<filter, key>, a filter per KV head trained for the model (filters=PATH)",
           "Godey et al. (Q-Filters), arXiv 2503.02812; kvpress QFilterPress",
           with_shared_parameters(
               {{"filters", "", "the model's Q-Filters: a safetensors file (or its folder), tensor q_filters [layers, KV heads, head_dim]"},
                {"dim_order", "hf", "hf: head dimensions as Hugging Face orders them (permuted for a GGUF llama) | model"}}, {.pieces = true})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            const std::string path = p.get_string("filters");
            const HeadDimOrder order = parse_head_dim_order(p.get_choice("dim_order", {"hf", "model"}));
            return std::make_unique<QFilterPress>(p, b, read_scored_parts(p), path, load_filters(path), order);
          },
          scored_press_role};
}

}  // namespace deferkv
