#include "press/core/allocation.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "deferkv/error.h"
#include "press/core/compresskv_profile.h"

namespace deferkv {
namespace {

struct KindName {
  AllocationKind kind;
  const char* alloc;        // the value of alloc=
  const char* base_method;  // the value of DeferKV's base=
};
constexpr KindName kKinds[] = {
    {AllocationKind::kUniform, "uniform", "snapkv"},
    {AllocationKind::kPyramid, "pyramid", "pyramidkv"},
    {AllocationKind::kAdaKv, "adakv", "adakv"},
    {AllocationKind::kAdaPyramid, "ada_pyramid", "ada_pyramidkv"},
    {AllocationKind::kCalibrated, "calibrated", "calibrated"},
    {AllocationKind::kPerLayer, "per_layer", "per_layer"},
};

const char* key_name(AllocationKey key) { return key == AllocationKey::kBase ? "base" : "alloc"; }
const char* kind_name(const KindName& k, AllocationKey key) {
  return key == AllocationKey::kBase ? k.base_method : k.alloc;
}

std::vector<std::string> kind_names(AllocationKey key) {
  std::vector<std::string> out;
  for (const KindName& k : kKinds) out.push_back(kind_name(k, key));
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " | ") + n;
  return out;
}

// The same count for every head.
std::vector<int64_t> per_head(const LayerShare& layer, int64_t count) {
  std::vector<int64_t> out;
  for (int64_t c : layer.candidates) out.push_back(std::clamp<int64_t>(count, 0, c));
  return out;
}

// Every head of a layer has the same candidates at a prompt's first eviction; the pyramid
// takes the smallest so no head is asked for more than it has (per_head clamps it to each
// head's own where the pyramid is shaped on the prompt's, LayerShare::pyramid_candidates).
int64_t pyramid_budget(const AllocationRule& rule, const LayerShare& layer) {
  const int64_t c = layer.pyramid_candidates > 0 ? layer.pyramid_candidates
                                                 : *std::min_element(layer.candidates.begin(), layer.candidates.end());
  return pyramid_layer_budgets(layer.base, c, layer.n_layer, rule.beta, rule.rounding)[layer.layer];
}

// "0.2/0.5/0.8": each a compression ratio in [0, 1), as a run's kv_ratio.
std::vector<double> parse_layer_ratios(const std::string& press, const std::string& text) {
  std::vector<double> out;
  size_t begin = 0;
  for (;;) {
    const size_t end = text.find('/', begin);
    const std::string item = text.substr(begin, end - begin);
    size_t used = 0;
    double r = -1;
    try {
      r = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !(r >= 0.0 && r < 1.0)) {
      fail("press '{}': ratios= takes compression ratios in [0, 1) joined by '/', got '{}' in '{}'", press, item,
           text);
    }
    out.push_back(r);
    if (end == std::string::npos) return out;
    begin = end + 1;
  }
}

}  // namespace

int64_t per_layer_ratio_count(double ratio, int64_t candidates, int64_t reserved) {
  const auto kept = static_cast<int64_t>(static_cast<double>(candidates + reserved) * (1.0 - ratio));
  return std::clamp<int64_t>(kept - reserved, 0, candidates);
}

void check_layer_ratios(const AllocationRule& rule, int64_t n_layer, const std::string& description) {
  if (rule.kind != AllocationKind::kPerLayer || static_cast<int64_t>(rule.layer_ratios.size()) == n_layer) return;
  fail("press '{}': ratios= gives {} compression ratios; this model has {} layers (one ratio per layer)",
       description, rule.layer_ratios.size(), n_layer);
}

std::vector<PressParameter> allocation_parameters(AllocationKey key, AllocationKind default_kind) {
  const std::string help =
      key == AllocationKey::kBase ? "allocation of the base method: " : "allocation over layers and heads: ";
  std::string default_name;
  for (const KindName& k : kKinds) {
    if (k.kind == default_kind) default_name = kind_name(k, key);
  }
  return {
      {key_name(key), default_name, help + joined(kind_names(key))},
      {"rounding", "exact",
       "pyramid layer budgets: exact (the layers keep exactly the total) | reference (the reference code's floored "
       "step, which can keep more)"},
      {"beta", "20", "pyramid steepness: the top layer keeps about (b - w) / beta"},
      {"alpha", "0.2", "adakv: floor, every head keeps at least alpha * (b - w)"},
      {"profile", "", "calibrated: calibration profile JSON whose layer_scores set the layer budgets"},
      {"ratios", "",
       "per_layer: one compression ratio per layer, bottom first, joined by '/' (e.g. 0.2/0.5/0.5/0.8); layer l "
       "keeps int(T * (1 - r_l)) per head"},
  };
}

AllocationRule read_allocation(const PressParams& params, AllocationKey allocation_key) {
  AllocationRule rule;
  const char* key = key_name(allocation_key);
  const std::string kind = params.get_choice(key, kind_names(allocation_key));
  for (const KindName& k : kKinds) {
    if (kind == kind_name(k, allocation_key)) rule.kind = k.kind;
  }
  rule.rounding = params.get_choice("rounding", {"exact", "reference"}) == "reference" ? PyramidRounding::kReference
                                                                                          : PyramidRounding::kExact;
  rule.beta = params.get_int("beta", 1, 1 << 20);
  rule.alpha = params.get_double("alpha", 0.0, 1.0);
  const std::string& profile = params.get_string("profile");
  if (rule.kind == AllocationKind::kCalibrated) {
    if (profile.empty()) fail("press '{}': {}={} needs profile=PATH (a calibration profile JSON)", params.name(), key, kind);
    rule.layer_scores = load_compresskv_profile(profile).layer_scores;
  } else if (!profile.empty()) {
    fail("press '{}': profile= is read by {}=calibrated only", params.name(), key);
  }
  const std::string& ratios = params.get_string("ratios");
  if (rule.kind == AllocationKind::kPerLayer) {
    if (ratios.empty()) {
      fail("press '{}': {}=per_layer needs ratios=r0/r1/... (one compression ratio per layer)", params.name(), key);
    }
    rule.layer_ratios = parse_layer_ratios(params.name(), ratios);
  } else if (!ratios.empty()) {
    fail("press '{}': ratios= is read by {}=per_layer only", params.name(), key);
  }
  return rule;
}

std::vector<int64_t> allocate(const AllocationRule& rule, const LayerShare& layer, const HeadScores& scores) {
  if (layer.layer < rule.skip_layers) return layer.candidates;
  switch (rule.kind) {
    case AllocationKind::kUniform:
      return per_head(layer, layer.base);
    case AllocationKind::kPyramid:
      return per_head(layer, pyramid_budget(rule, layer));
    case AllocationKind::kAdaKv:
      return adakv_head_budgets(scores, layer.base, rule.alpha);
    case AllocationKind::kAdaPyramid:
      return adakv_head_budgets(scores, pyramid_budget(rule, layer), rule.alpha);
    case AllocationKind::kCalibrated: {
      if (static_cast<int64_t>(rule.layer_scores.size()) != layer.n_layer) {
        fail("the calibration profile has {} layer scores; this model has {} layers", rule.layer_scores.size(),
             layer.n_layer);
      }
      const int64_t b = layer.budget;
      const int64_t layer_budget =
          error_aware_layer_budgets(rule.layer_scores, b, calibrated_floor(b), calibrated_cap(b))[layer.layer];
      return per_head(layer, layer_budget - layer.reserved);
    }
    case AllocationKind::kPerLayer: {
      // [OUR FORMULATION] the run's budget b is not read here: as kvpress's wrapper, the
      // list replaces it (b still decides whether the prompt is cut at all).
      check_layer_ratios(rule, layer.n_layer, "per_layer");
      std::vector<int64_t> out;
      for (int64_t c : layer.candidates) {
        out.push_back(per_layer_ratio_count(rule.layer_ratios[layer.layer], c, layer.reserved));
      }
      return out;
    }
  }
  fail("internal: unknown allocation");
}

int64_t calibrated_floor(int64_t b) { return std::min<int64_t>(32, b); }
int64_t calibrated_cap(int64_t b) { return 3 * b; }

std::vector<int64_t> round_preserving_sum(const std::vector<double>& shares, int64_t total) {
  std::vector<int64_t> out(shares.size());
  std::vector<size_t> order(shares.size());
  int64_t assigned = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    out[i] = static_cast<int64_t>(std::floor(shares[i]));
    assigned += out[i];
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return shares[a] - std::floor(shares[a]) > shares[b] - std::floor(shares[b]);
  });
  for (size_t i = 0; assigned < total && i < order.size(); ++i, ++assigned) ++out[order[i]];
  return out;
}

std::vector<int64_t> pyramid_layer_budgets(int64_t base, int64_t n_candidates, int64_t n_layer, int64_t beta,
                                           PyramidRounding rounding) {
  if (beta <= 0) fail("pyramidkv: beta must be positive, got {}", beta);
  if (n_layer == 1) return {std::min(base, n_candidates)};
  int64_t min_budget = base / beta;
  int64_t max_budget = 2 * base - min_budget;
  if (max_budget >= n_candidates) {
    max_budget = n_candidates;
    min_budget = 2 * base - max_budget;
  }
  if (rounding == PyramidRounding::kReference) {
    const int64_t step = (max_budget - min_budget) / (n_layer - 1);
    std::vector<int64_t> out(static_cast<size_t>(n_layer));
    for (int64_t l = 0; l < n_layer; ++l) out[l] = std::max<int64_t>(0, max_budget - l * step);
    return out;
  }
  std::vector<double> shares(static_cast<size_t>(n_layer));
  const double step = static_cast<double>(max_budget - min_budget) / static_cast<double>(n_layer - 1);
  for (int64_t l = 0; l < n_layer; ++l) shares[l] = std::max(0.0, max_budget - step * static_cast<double>(l));
  return round_preserving_sum(shares, std::min(base, n_candidates) * n_layer);
}

std::vector<int64_t> adakv_head_budgets(const HeadScores& scores, int64_t base,
                                        double alpha) {
  const auto heads = static_cast<int64_t>(scores.size());
  struct Entry {
    float score;
    int32_t head;
    int32_t index;
  };
  std::vector<Entry> all;
  for (int32_t g = 0; g < heads; ++g) {
    for (size_t j = 0; j < scores[g].size(); ++j) all.push_back({scores[g][j], g, static_cast<int32_t>(j)});
  }
  const int64_t winners = std::min<int64_t>(heads * base, static_cast<int64_t>(all.size()));
  std::nth_element(all.begin(), all.begin() + winners, all.end(), [](const Entry& a, const Entry& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.head != b.head ? a.head < b.head : a.index < b.index;
  });
  std::vector<int64_t> won(static_cast<size_t>(heads), 0);
  for (int64_t i = 0; i < winners; ++i) ++won[all[i].head];

  const auto floor_budget = static_cast<int64_t>(static_cast<double>(base) * alpha);
  std::vector<double> shares(static_cast<size_t>(heads));
  double total = 0;
  for (int64_t g = 0; g < heads; ++g) {
    shares[g] = std::min(static_cast<double>(won[g]) * (1.0 - alpha) + static_cast<double>(floor_budget),
                         static_cast<double>(scores[g].size()));
    total += shares[g];
  }
  return round_preserving_sum(shares, std::min<int64_t>(std::llround(total), heads * base));
}

std::vector<int64_t> error_aware_layer_budgets(const std::vector<double>& u, int64_t b, int64_t floor, int64_t cap) {
  const auto n = static_cast<int64_t>(u.size());
  const int64_t total = b * n;
  std::vector<int64_t> out(u.size());
  int64_t sum = 0;
  for (int64_t l = 0; l < n; ++l) {
    out[l] = std::clamp<int64_t>(floor + std::llround(u[l] * static_cast<double>(total - floor * n)), floor, cap);
    sum += out[l];
  }
  std::vector<size_t> order(u.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) { return u[a] > u[c]; });
  // Repair one step at a time, cycling through the layers in u order.
  for (bool changed = true; sum != total && changed;) {
    changed = false;
    for (size_t i = 0; i < order.size() && sum != total; ++i) {
      if (sum < total) {
        const size_t l = order[i];
        if (out[l] < cap) ++out[l], ++sum, changed = true;
      } else {
        const size_t l = order[order.size() - 1 - i];
        if (out[l] > floor) --out[l], --sum, changed = true;
      }
    }
  }
  return out;
}

}  // namespace deferkv
