#include "eval/analysis/attention_consistency.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "eval/analysis/head_attention_tap.h"
#include "observe/attention_tap.h"
#include "press/core/selection.h"

namespace deferkv::eval {
namespace {

// Each chosen query position's attention rows (per layer and query head) over the
// prompt keys, renormalised.
class PromptAttentionRows {
 public:
  PromptAttentionRows(int64_t first_position, int64_t last_position, int64_t prompt_end)
      : last_(last_position), tap_(std::make_unique<HeadAttentionTap>(first_position, [this, prompt_end](
                                       const AttentionEvent& e, int64_t i, const std::vector<std::vector<float>>& rows) {
          record(e, i, rows, prompt_end);
        })) {}

  // The tap to set on the session (once).
  std::unique_ptr<Press> take_tap() { return std::move(tap_); }

  const std::vector<double>& row(int32_t position, int64_t layer, int64_t head) const {
    return rows_.at({position, layer, head});
  }
  bool has(int32_t position) const { return rows_.count({position, 0, 0}) > 0; }

 private:
  void record(const AttentionEvent& e, int64_t i, const std::vector<std::vector<float>>& rows, int64_t prompt_end) {
    const int32_t position = e.positions[i];
    if (position > last_) return;
    const int64_t group = e.shape.n_head / e.shape.n_head_kv;
    for (int64_t h = 0; h < e.shape.n_head; ++h) {
      const KvHeadView& kv = e.kv[static_cast<size_t>(h / group)];
      const int64_t prompt_keys =
          std::lower_bound(kv.positions, kv.positions + kv.length, static_cast<int32_t>(prompt_end)) - kv.positions;
      std::vector<double> pi(rows[h].begin(), rows[h].begin() + prompt_keys);
      double total = 0;
      for (double x : pi) total += x;
      for (double& x : pi) x /= total;
      rows_[{position, e.layer, h}] = std::move(pi);
    }
  }

  int64_t last_;
  std::unique_ptr<HeadAttentionTap> tap_;
  std::map<std::tuple<int32_t, int64_t, int64_t>, std::vector<double>> rows_;
};

}  // namespace

double jsd_base2(const std::vector<double>& p, const std::vector<double>& q) {
  double js = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    const double m = 0.5 * (p[j] + q[j]);
    if (p[j] > 0) js += 0.5 * p[j] * std::log2(p[j] / m);
    if (q[j] > 0) js += 0.5 * q[j] * std::log2(q[j] / m);
  }
  return js;
}

double top_b_recall(const std::vector<double>& p, const std::vector<double>& q, int64_t candidates, int64_t b) {
  auto top = [&](const std::vector<double>& v) {
    return top_k(std::vector<float>(v.begin(), v.begin() + candidates), b);
  };
  const auto a = top(p), c = top(q);
  std::vector<int32_t> both;
  std::set_intersection(a.begin(), a.end(), c.begin(), c.end(), std::back_inserter(both));
  return static_cast<double>(both.size()) / static_cast<double>(std::max<size_t>(1, a.size()));
}

ConsistencyReport measure_attention_consistency(Session& session, const std::vector<std::vector<int32_t>>& prompts,
                                                const ConsistencyOptions& o) {
  const ModelConfig& c = session.model().config();
  const int64_t last_step = o.decode_probes + o.reference_steps;
  std::vector<std::string> names;
  for (int64_t k = o.prompt_probes; k >= 1; --k) names.push_back(fmt::format("-{}", k));
  for (int64_t s = 1; s <= o.decode_probes; ++s) names.push_back(fmt::format("+{}", s));
  names.push_back("window");
  names.push_back("deferkv");
  std::vector<double> jsd(names.size(), 0.0), recall(names.size(), 0.0);
  ConsistencyReport report;
  int64_t measured = 0;  // (sample, layer, head) triples
  for (const auto& prompt : prompts) {
    const auto t = static_cast<int64_t>(prompt.size());
    if (t <= std::max(o.window, o.prompt_probes) + o.budget - o.window) {
      fail("a prompt of {} tokens is too short for a window of {}, {} probes and a budget of {}", t, o.window,
           o.prompt_probes, o.budget);
    }
    session.truncate(0);
    PromptAttentionRows rec(t - std::max(o.prompt_probes, o.window), t - 1 + last_step, t);
    {
      const ScopedTap tap(session, rec.take_tap());
      session.prefill(prompt);
      for (int64_t s = 0; s < last_step && session.n_past() < session.n_ctx(); ++s) {
        const float* logits = session.last_logits();
        const auto token = static_cast<int32_t>(std::max_element(logits, logits + c.n_vocab) - logits);
        if (session.model().tokenizer().is_end_of_generation(token)) break;
        session.decode(token);
      }
    }
    // Step s's query sits at position T + s - 1.
    std::vector<int32_t> reference_positions;
    for (int64_t s = o.decode_probes + 1; s <= last_step; ++s) {
      if (rec.has(static_cast<int32_t>(t + s - 1))) reference_positions.push_back(static_cast<int32_t>(t + s - 1));
    }
    if (reference_positions.empty() || !rec.has(static_cast<int32_t>(t + o.decode_probes - 1))) {
      fail("generation ended before the reference steps (after {} tokens); use a longer-answer prompt",
           session.n_past() - t);
    }
    report.reference_rows += static_cast<int64_t>(reference_positions.size());
    const int64_t candidates = t - o.window, b = o.budget - o.window;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      for (int64_t h = 0; h < c.n_head; ++h) {
        std::vector<double> reference(static_cast<size_t>(t), 0.0);
        for (int32_t p : reference_positions) {
          const auto& r = rec.row(p, l, h);
          for (int64_t j = 0; j < t; ++j) reference[j] += r[j] / static_cast<double>(reference_positions.size());
        }
        std::vector<std::vector<double>> probes;
        for (int64_t k = o.prompt_probes; k >= 1; --k) probes.push_back(rec.row(static_cast<int32_t>(t - k), l, h));
        for (int64_t s = 1; s <= o.decode_probes; ++s) probes.push_back(rec.row(static_cast<int32_t>(t + s - 1), l, h));
        // SnapKV's window row: the mean of the last w prompt rows (each over its visible keys).
        std::vector<double> window(static_cast<size_t>(t), 0.0);
        for (int64_t k = 1; k <= o.window; ++k) {
          const auto& r = rec.row(static_cast<int32_t>(t - k), l, h);
          for (size_t j = 0; j < r.size(); ++j) window[j] += r[j] / static_cast<double>(o.window);
        }
        // DeferKV (d = 1, block mode): (eta * window + step 1) / (1 + eta).
        std::vector<double> fused(static_cast<size_t>(t));
        const auto& step1 = rec.row(static_cast<int32_t>(t), l, h);
        for (int64_t j = 0; j < t; ++j) fused[j] = (o.eta * window[j] + step1[j]) / (1.0 + o.eta);
        probes.push_back(window);
        probes.push_back(fused);
        for (size_t i = 0; i < probes.size(); ++i) {
          probes[i].resize(static_cast<size_t>(t), 0.0);  // prompt rows see only their prefix
          jsd[i] += 1.0 - jsd_base2(probes[i], reference);
          recall[i] += top_b_recall(probes[i], reference, candidates, b);
        }
        ++measured;
      }
    }
    report.prompt_tokens += t;
    ++report.samples;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    report.points.push_back({names[i], jsd[i] / static_cast<double>(measured), recall[i] / static_cast<double>(measured)});
  }
  return report;
}

}  // namespace deferkv::eval
