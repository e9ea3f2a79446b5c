#include "eval/run/model_card_coverage.h"

#include <fmt/format.h>

#include "tensor/gguf_file.h"

namespace deferkv::eval {

void warn_if_card_does_not_cover(const Model& model, Benchmark benchmark, std::FILE* out) {
  // The name tools/train writes into the retrieval model's GGUF.
  if (model.gguf().get_string_opt("general.name").value_or("") != "deferkv-retrieval") return;
  if (benchmark == Benchmark::kRuler || out == nullptr) return;
  const char* what = benchmark == Benchmark::kNiah ? "NIAH's question" : "LongBench's questions";
  fmt::print(out,
             "warning: the embedded retrieval model was trained on RULER's wording only, not on {}: its card "
             "(models/README.md) does not cover this benchmark, so the scores below are noise, not the methods'. "
             "Give -m a model that answers it, or use --bench ruler\n",
             what);
}

}  // namespace deferkv::eval
