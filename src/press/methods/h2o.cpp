// H2O [docs/methods/h2o.md]: heavy hitters, the entries that have drawn the most attention
// from every query so far, plus the most recent tokens.
//
// per_step=false (default; the one-shot form the KV-compression papers compare with):
// at the end of the prefill every prompt query's attention is summed per entry (no
// normalisation by how many queries see an entry, hence a lean towards early tokens),
// and each KV head keeps its top b - window plus the last `window` prompt tokens.
// per_step=true (the original): the sums keep accumulating over decode queries, and
// after the prefill and every decode step (every=n: every n-th) each head holding more
// than b entries keeps its newest `recent` entries and the top b - recent of the older
// ones, generated tokens included.
#include "deferkv/error.h"
#include "press/core/scored_press.h"

namespace deferkv {
namespace {

class H2oPress final : public ScoredPress {
 public:
  using ScoredPress::ScoredPress;

 protected:
  // The attention each entry has drawn.
  std::vector<std::vector<float>> score(const LayerEviction& layer) override { return layer.candidate_attention(); }
};

}  // namespace

PressMethod h2o_method() {
  return {{"h2o", "heavy hitters: attention summed over every query, top-k per KV head plus recent tokens",
           "H2O, arXiv 2306.14048",
           with_shared_parameters(
               {{"window", "8", "one-shot: recent prompt tokens always kept"},
                {"recent", "0", "per step: newest entries always kept (0: half the budget, as the original's 10%+10%)"}})},
          [](const PressParams& p, const KvBudget& b) -> std::unique_ptr<Press> {
            ScoredParts parts = read_scored_parts(p);
            parts.capture.observations = {Observation::every(Observation::Queries::kPromptAll)};
            if (!parts.trigger.per_step()) {
              parts.window = p.get_int("window", 0, 1 << 20);
              return std::make_unique<H2oPress>(p, b, std::move(parts));
            }
            int64_t recent = p.get_int("recent", 0, 1 << 20);
            if (recent == 0) {
              if (b.is_ratio()) fail("h2o:per_step=true with --kv-ratio needs an explicit recent=N");
              recent = b.resolve(0) / 2;
            }
            if (!b.is_ratio() && b.resolve(0) <= recent) {
              fail("h2o: the budget of {} per head leaves no room for heavy hitters beside {} recent entries",
                   b.resolve(0), recent);
            }
            parts.capture.observations.push_back(Observation::every(Observation::Queries::kDecodeAll));
            parts.window = recent;
            return std::make_unique<H2oPress>(p, b, std::move(parts));
          },
          scored_press_role};
}

}  // namespace deferkv
