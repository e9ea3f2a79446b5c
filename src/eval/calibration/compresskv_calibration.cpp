#include "eval/calibration/compresskv_calibration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/eval_tasks.h"
#include "deferkv/tokenizer.h"
#include "eval/analysis/head_attention_tap.h"
#include "eval/metrics/rouge_1.h"
#include "observe/attention_tap.h"
#include "press/core/pooling.h"
#include "press/core/selection.h"

namespace deferkv::eval {
namespace {

constexpr int64_t kErrorWindow = 8;     // §9.3: the restricted set is 24 chosen + a window of 8
constexpr int64_t kErrorChosen = 24;
constexpr int64_t kErrorPoolKernel = 5;

// Where the needle's tokens sit in the prompt: the first window of the needle's length
// sharing more than 90% of the needle's distinct tokens (as the reference locates it).
std::pair<int64_t, int64_t> needle_span(const std::vector<int32_t>& prompt, const std::vector<int32_t>& needle) {
  const std::set<int32_t> wanted(needle.begin(), needle.end());
  const auto n = static_cast<int64_t>(needle.size());
  for (int64_t start = 0; start + n <= static_cast<int64_t>(prompt.size()); ++start) {
    std::set<int32_t> seen;
    for (int64_t j = start; j < start + n; ++j) {
      if (wanted.count(prompt[j]) > 0) seen.insert(prompt[j]);
    }
    if (static_cast<double>(seen.size()) > 0.9 * static_cast<double>(wanted.size())) return {start, start + n};
  }
  fail("internal: the needle was not found in its probe");
}

double rouge_1_recall(const std::string& prediction, std::string_view reference) {
  const auto p = rouge_score_tokens(prediction), r = rouge_score_tokens(reference);
  std::multiset<std::string> left(p.begin(), p.end());
  int64_t shared = 0;
  for (const auto& t : r) {
    const auto it = left.find(t);
    if (it != left.end()) ++shared, left.erase(it);
  }
  return r.empty() ? 0.0 : 100.0 * static_cast<double>(shared) / static_cast<double>(r.size());
}

// One calibration prompt, the text the model must copy out of it and that text's tokens.
struct Probe {
  TaskSample sample;
  std::string reference;
  std::vector<int32_t> needle;
};

std::vector<Probe> make_probes(const Tokenizer& tokenizer, const CompressKvCalibrationOptions& o) {
  TaskGenerator generator(tokenizer, TaskOptions{});
  std::vector<Probe> probes;
  if (o.probes == CalibrationProbes::kRuler) {
    for (int64_t length : o.lengths) {
      for (int64_t i = 0; i < o.samples; ++i) {
        TaskSample sample = generator.ruler("niah_single_1", length, i);
        std::string value = sample.references.at(0);
        // As the value stands in the prompt, after a space ("… is: 1234567."): SentencePiece
        // puts that space before the text itself.
        auto needle = tokenizer.encode(tokenizer.adds_space_prefix() ? value : " " + value, false, false);
        probes.push_back({std::move(sample), std::move(value), std::move(needle)});
      }
    }
    return probes;
  }
  const std::string needle_text(niah_needle());
  const auto needle = tokenizer.encode(needle_text.substr(needle_text.find_first_not_of('\n')), false, false);
  for (int64_t length : o.lengths) {
    for (double depth : o.depths.empty() ? niah_default_depths() : o.depths) {
      probes.push_back({generator.niah(length, depth), needle_text, needle});
    }
  }
  return probes;
}

int32_t argmax(const Session& session) {
  const float* l = session.last_logits();
  return static_cast<int32_t>(std::max_element(l, l + session.model().config().n_vocab) - l);
}

// Greedy continuation after the prompt is in the session: stops at end of generation,
// a newline or max_new tokens. `after_step(token)` sees each token before it is fed.
std::string continue_greedily(Session& session, int64_t max_new, const std::function<void(int32_t)>& after_step) {
  const Tokenizer& tokenizer = session.model().tokenizer();
  std::vector<int32_t> generated;
  for (int64_t i = 0; i < max_new && session.n_past() < session.n_ctx(); ++i) {
    const int32_t token = argmax(session);
    if (tokenizer.is_end_of_generation(token)) break;
    after_step(token);
    generated.push_back(token);
    if (tokenizer.token_piece(token).find('\n') != std::string::npos) break;
    session.decode(token);
  }
  return tokenizer.decode(generated);
}

}  // namespace

CalibrationProbes calibration_probes_from_name(const std::string& name) {
  if (name == "niah") return CalibrationProbes::kNiah;
  if (name == "ruler") return CalibrationProbes::kRuler;
  fail("--probes: '{}' is not niah or ruler", name);
}

CompressKvCalibration calibrate_compresskv(Session& session, const CompressKvCalibrationOptions& o) {
  const ModelConfig& c = session.model().config();
  const Tokenizer& tokenizer = session.model().tokenizer();

  CompressKvCalibration result;
  std::vector<std::vector<double>> score_sum(static_cast<size_t>(c.n_layer), std::vector<double>(c.n_head, 0.0));
  std::vector<TaskSample> answered;
  // A. Retrieval heads.
  for (const Probe& probe : make_probes(tokenizer, o)) {
    const TaskSample& sample = probe.sample;
    const auto& tokens = sample.tokens;
    const auto [n0, n1] = needle_span(tokens, probe.needle);
    const auto t = static_cast<int64_t>(tokens.size());
    std::vector<std::vector<double>> step_mass(static_cast<size_t>(c.n_layer), std::vector<double>(c.n_head, 0.0));
    std::vector<std::vector<double>> probe_sum = step_mass;
    session.truncate(0);
    const ScopedTap tap(session, std::make_unique<HeadAttentionTap>(t - 1, [&](const AttentionEvent& e, int64_t,
                                                               const std::vector<std::vector<float>>& rows) {
      const int64_t group = e.shape.n_head / e.shape.n_head_kv;
      for (int64_t h = 0; h < e.shape.n_head; ++h) {
        const KvHeadView& kv = e.kv[static_cast<size_t>(h / group)];
        double mass = 0;
        for (int64_t j = 0; j < kv.length; ++j) {
          if (kv.positions[j] >= n0 && kv.positions[j] < n1) mass += rows[h][j];
        }
        step_mass[e.layer][h] = mass;
      }
    }));
    session.prefill(std::vector<int32_t>(tokens.begin(), tokens.end() - 1));
    session.decode(tokens.back());
    const std::string answer = continue_greedily(session, o.max_new_tokens, [&](int32_t token) {
      const auto copies = std::count(tokens.begin() + n0, tokens.begin() + n1, token);
      for (int64_t l = 0; l < c.n_layer; ++l) {
        for (int64_t h = 0; h < c.n_head; ++h) probe_sum[l][h] += static_cast<double>(copies) * step_mass[l][h];
      }
    });
    ++result.probes;
    if (rouge_1_recall(answer, probe.reference) <= o.min_recall) continue;
    ++result.answered;
    answered.push_back(sample);
    for (int64_t l = 0; l < c.n_layer; ++l) {
      for (int64_t h = 0; h < c.n_head; ++h) score_sum[l][h] += probe_sum[l][h];
    }
  }
  if (result.answered == 0) {
    fail("none of the {} probes was answered (ROUGE-1 recall above {}): this model does not retrieve the needle, "
         "so its retrieval heads cannot be found{}",
         result.probes, o.min_recall,
         o.probes == CalibrationProbes::kNiah ? " (a model trained on RULER's wording: --probes ruler)" : "");
  }
  CompressKvProfile& profile = result.profile;
  profile.model_name = tokenizer.model_name();
  profile.n_layer = c.n_layer;
  profile.n_head = c.n_head;
  result.head_scores = score_sum;
  for (auto& layer : result.head_scores) {
    for (double& s : layer) s /= static_cast<double>(result.answered);
  }
  for (const auto& layer : result.head_scores) {
    std::vector<float> scores(layer.begin(), layer.end());
    std::vector<int32_t> best = top_k(scores, std::min<int64_t>(o.first_k, c.n_head));
    std::sort(best.begin(), best.end(), [&](int32_t a, int32_t b) { return scores[a] != scores[b] ? scores[a] > scores[b] : a < b; });
    profile.retrieval_heads.emplace_back(best.begin(), best.end());
  }

  // B. Layer error scores on the answered probes.
  std::vector<double> error(static_cast<size_t>(c.n_layer), 0.0);
  for (const TaskSample& sample : answered) {
    const auto t = static_cast<int64_t>(sample.tokens.size());
    // Window scores of each layer's retrieval heads, then the restricted set per layer.
    std::vector<std::vector<double>> window_scores(static_cast<size_t>(c.n_layer), std::vector<double>(t, 0.0));
    std::vector<std::vector<char>> kept(static_cast<size_t>(c.n_layer));
    session.truncate(0);
    const ScopedTap tap(session, std::make_unique<HeadAttentionTap>(t - kErrorWindow, [&](const AttentionEvent& e, int64_t row,
                                                                          const std::vector<std::vector<float>>& rows) {
      const int64_t group = e.shape.n_head / e.shape.n_head_kv;
      const auto& heads = profile.retrieval_heads[e.layer];
      if (e.positions[row] < t) {  // a window query of the prompt
        for (int64_t h : heads) {
          for (int64_t j = 0; j < t; ++j) window_scores[e.layer][j] += rows[h][j] / static_cast<double>(heads.size());
        }
        return;
      }
      if (kept[e.layer].empty()) {
        std::vector<float> s(window_scores[e.layer].begin(), window_scores[e.layer].end() - kErrorWindow);
        kept[e.layer].assign(static_cast<size_t>(t), 0);
        for (int32_t j : top_k(pool_scores(s, Pooling::kAvg, kErrorPoolKernel), kErrorChosen)) kept[e.layer][j] = 1;
        for (int64_t j = t - kErrorWindow; j < t; ++j) kept[e.layer][j] = 1;
      }
      double diff = 0, norm = 0;
      for (int64_t h = 0; h < e.shape.n_head; ++h) {
        const KvHeadView& kv = e.kv[static_cast<size_t>(h / group)];
        const int64_t d = e.shape.head_dim;
        std::vector<double> full(static_cast<size_t>(d), 0.0), cut(static_cast<size_t>(d), 0.0);
        double kept_mass = 0;
        KvRowReader value(kv.values);  // the stored values, as float32
        for (int64_t j = 0; j < kv.length; ++j) {
          const float* v = value(j);
          const bool keep = kv.positions[j] >= t || kept[e.layer][kv.positions[j]] != 0;
          for (int64_t x = 0; x < d; ++x) {
            full[x] += rows[h][j] * v[x];
            if (keep) cut[x] += rows[h][j] * v[x];
          }
          if (keep) kept_mass += rows[h][j];
        }
        // A head whose attention on the kept entries underflows to 0 (it looks elsewhere
        // only) has no restricted output: zero, so its error is its whole output. Dividing by
        // the 0 made the layer's error NaN and with it every layer's score uniform.
        const double renormalise = kept_mass > 0 ? 1.0 / kept_mass : 0.0;
        for (int64_t x = 0; x < d; ++x) {
          diff += std::pow(cut[x] * renormalise - full[x], 2);
          norm += full[x] * full[x];
        }
      }
      error[e.layer] += std::sqrt(diff) / (std::sqrt(norm) + 1e-5);
    }));
    session.prefill(sample.tokens);
    continue_greedily(session, o.max_new_tokens, [](int32_t) {});
  }
  double total = 0;
  for (double e : error) total += e;
  for (double e : error) profile.layer_scores.push_back(total > 0 ? e / total : 1.0 / static_cast<double>(c.n_layer));
  return result;
}

}  // namespace deferkv::eval
