#include "engine/kept_set_recorder.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/session.h"

namespace deferkv {
namespace {

double evicted_percent(double kept, double total) { return total > 0 ? 100.0 * (1.0 - kept / total) : 0.0; }

// "64", or "63.5" when the mean is not whole.
std::string entries_text(double mean) {
  return mean == static_cast<double>(static_cast<int64_t>(mean)) ? fmt::format("{}", static_cast<int64_t>(mean))
                                                                 : fmt::format("{:.1f}", mean);
}

struct PerHead {
  double mean = 0;
  int64_t min = 0, max = 0;
};

PerHead per_head(const KeptSet& kept) {
  PerHead p;
  if (kept.positions.empty()) return p;
  p.min = p.max = static_cast<int64_t>(kept.positions.front().size());
  for (const std::vector<int32_t>& head : kept.positions) {
    const auto n = static_cast<int64_t>(head.size());
    p.mean += static_cast<double>(n);
    p.min = std::min(p.min, n);
    p.max = std::max(p.max, n);
  }
  p.mean /= static_cast<double>(kept.positions.size());
  return p;
}

nlohmann::ordered_json step_json(const KeptSetRecorder& recorder) {
  return recorder.decode_step() ? nlohmann::ordered_json(*recorder.decode_step()) : nlohmann::ordered_json(nullptr);
}

}  // namespace

void KeptSetRecorder::attach(GenerateOptions& options) {
  options.after_prefill = [this, before = std::move(options.after_prefill)](const Session& session) {
    if (before) before(session);
    update(session);
  };
}

void KeptSetRecorder::update(const Session& session) {
  const std::optional<EvictionRecord>& eviction = session.last_eviction();
  std::optional<std::pair<int64_t, int64_t>> seen;
  if (eviction) seen.emplace(eviction->decode_step, eviction->n_past);
  if (taken_ && seen == eviction_seen_) return;
  taken_ = true;
  kept_ = kept_set(session);
  eviction_seen_ = seen;
  decode_step_ = eviction ? std::optional<int64_t>(eviction->decode_step) : std::nullopt;
}

nlohmann::ordered_json kept_stats_json(const KeptSetRecorder& recorder) {
  const KeptSet& kept = recorder.kept();
  const auto total = static_cast<double>(kept.tokens);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  int64_t all = 0;
  for (int64_t l = 0; l < kept.n_layer; ++l) {
    nlohmann::ordered_json heads = nlohmann::ordered_json::array();
    int64_t layer_kept = 0;
    for (int64_t h = 0; h < kept.n_head_kv; ++h) {
      const auto n = static_cast<int64_t>(kept.head(l, h).size());
      heads.push_back({{"kept", n}, {"evicted_percent", evicted_percent(static_cast<double>(n), total)}});
      layer_kept += n;
    }
    const double layer_total = total * static_cast<double>(kept.n_head_kv);
    layers.push_back({{"kept", layer_kept},
                      {"total", kept.tokens * kept.n_head_kv},
                      {"evicted_percent", evicted_percent(static_cast<double>(layer_kept), layer_total)},
                      {"heads", heads}});
    all += layer_kept;
  }
  const PerHead p = per_head(kept);
  return {{"tokens", kept.tokens},
          {"decode_step", step_json(recorder)},
          {"per_head", {{"mean", p.mean}, {"min", p.min}, {"max", p.max}}},
          {"evicted_percent",
           evicted_percent(static_cast<double>(all), total * static_cast<double>(kept.positions.size()))},
          {"layers", layers}};
}

std::string kept_summary_line(const KeptSet& kept) {
  const PerHead p = per_head(kept);
  return fmt::format("kept {} of {} entries per head on average ({:.1f}% evicted); per head min {} max {}",
                     entries_text(p.mean), kept.tokens, evicted_percent(p.mean, static_cast<double>(kept.tokens)),
                     p.min, p.max);
}

void write_kept_dump(const std::string& path, const KeptSetRecorder& recorder) {
  const KeptSet& kept = recorder.kept();
  std::ofstream out(path);
  if (!out) fail("cannot write the kept positions to '{}'", path);
  for (int64_t l = 0; l < kept.n_layer; ++l) {
    for (int64_t h = 0; h < kept.n_head_kv; ++h) {
      const std::vector<int32_t>& positions = kept.head(l, h);
      const nlohmann::ordered_json line = {{"layer", l},
                                           {"kv_head", h},
                                           {"tokens", kept.tokens},
                                           {"decode_step", step_json(recorder)},
                                           {"kept", positions.size()},
                                           {"positions", positions}};
      out << line.dump() << '\n';
    }
  }
  if (!out) fail("cannot write the kept positions to '{}'", path);
}

}  // namespace deferkv
