#include "press/core/selection.h"

#include <algorithm>
#include <numeric>

#include "deferkv/error.h"
#include "kernels/vec.h"

namespace deferkv {

std::vector<PressParameter> selection_parameters(int64_t chunk_default) {
  return {
      {"chunk", std::to_string(chunk_default),
       "selection: keep whole chunks of this many consecutive tokens, shared by the heads (0: each head its own "
       "top-k)"},
      {"reuse", "1", "chunk: layers sharing one chunk choice (1: every layer chooses)"},
  };
}

Selection read_selection(const PressParams& params) {
  Selection s;
  if (params.has("chunk")) s.chunk = params.get_int("chunk", 0, 1 << 20);
  if (params.has("reuse")) s.reuse = params.get_int("reuse", 1, 1 << 20);
  return s;
}

std::vector<std::vector<int32_t>> LayerSelector::dropped(int64_t layer, const HeadScores& scores,
                                                         const std::vector<int64_t>& counts) {
  const size_t heads = scores.size();
  std::vector<std::vector<int32_t>> out(heads);
  if (selection_.chunk == 0) {
    for (size_t g = 0; g < heads; ++g) out[g] = outside_top_k(scores[g], counts[g]);
    return out;
  }
  if (std::any_of(counts.begin(), counts.end(), [&](int64_t k) { return k != counts[0]; })) {
    fail("chunks are shared by every head of a layer, so they need the same count per head (not adakv's)");
  }
  size_t shortest = scores[0].size();
  for (const auto& s : scores) shortest = std::min(shortest, s.size());
  std::vector<int32_t> kept;
  if (layer % selection_.reuse != 0 && !leader_.empty()) {
    for (int32_t j : leader_) {
      if (static_cast<size_t>(j) < shortest) kept.push_back(j);
    }
  } else {
    std::vector<float> token_scores(shortest, 0.0f);
    for (const auto& head : scores) {
      for (size_t j = 0; j < shortest; ++j) token_scores[j] += head[j];
    }
    leader_ = top_chunks(token_scores, selection_.chunk, std::max<int64_t>(1, counts[0] / selection_.chunk));
    kept = leader_;
  }
  for (size_t g = 0; g < heads; ++g) out[g] = complement(kept, static_cast<int64_t>(scores[g].size()));
  return out;
}

namespace {

// Drops this few or fewer: top_k finds the dropped instead of ordering every index.
constexpr int64_t kFewDropped = 16;

// The selection's order: the higher score first, then the lower index. A strict total
// order, so the k best are one set whatever the algorithm.
auto better_in(std::span<const float> scores) {
  return [scores](int32_t a, int32_t b) { return scores[a] != scores[b] ? scores[a] > scores[b] : a < b; };
}

// The `count` worst indices (count <= size) under better_in, ascending. One pass in index
// order holds the worst seen so far, best first. A new index ties below every index held,
// so it enters exactly when its score is not above the best one held (the cut), and the
// scores above it are passed over by a vector scan. For a per-step press that drops one
// entry of a long head this is a scan for the minimum, not a selection over every index.
std::vector<int32_t> worst_few(std::span<const float> scores, int64_t count) {
  const auto better = better_in(scores);
  const auto n = static_cast<int64_t>(scores.size());
  std::vector<int32_t> worst;
  if (count == 0) return worst;
  worst.reserve(static_cast<size_t>(count) + 1);
  auto hold = [&](int32_t j) {
    worst.insert(std::upper_bound(worst.begin(), worst.end(), j, better), j);
    if (static_cast<int64_t>(worst.size()) > count) worst.erase(worst.begin());
  };
  int64_t j = 0;
  for (; j < count; ++j) hold(static_cast<int32_t>(j));
  for (; j < n; ++j) {
    j += first_not_above_f32(scores.data() + j, n - j, scores[static_cast<size_t>(worst.front())]);
    if (j < n) hold(static_cast<int32_t>(j));
  }
  std::sort(worst.begin(), worst.end());
  return worst;
}

}  // namespace

std::vector<int32_t> outside_top_k(std::span<const float> scores, int64_t k) {
  const auto n = static_cast<int64_t>(scores.size());
  k = std::clamp<int64_t>(k, 0, n);
  if (n - k <= kFewDropped) return worst_few(scores, n - k);
  return complement(top_k(scores, k), n);
}

std::vector<int32_t> top_k(std::span<const float> scores, int64_t k) {
  const auto n = static_cast<int64_t>(scores.size());
  k = std::clamp<int64_t>(k, 0, n);
  if (n - k <= kFewDropped) return complement(worst_few(scores, n - k), n);
  std::vector<int32_t> order = index_range(0, n);
  std::nth_element(order.begin(), order.begin() + k, order.end(), better_in(scores));
  // Ascending by a sweep over the marked indices, not a sort.
  std::vector<char> kept(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < k; ++i) kept[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  order.clear();
  for (int64_t j = 0; j < n; ++j) {
    if (kept[static_cast<size_t>(j)]) order.push_back(static_cast<int32_t>(j));
  }
  return order;
}

std::vector<int32_t> top_chunks(const std::vector<float>& scores, int64_t chunk, int64_t n_chunks) {
  const auto n = static_cast<int64_t>(scores.size());
  const int64_t count = (n + chunk - 1) / chunk;
  std::vector<float> chunk_scores(static_cast<size_t>(count));
  for (int64_t c = 0; c < count; ++c) {
    const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
    double sum = 0;
    for (int64_t j = begin; j < end; ++j) sum += scores[j];
    chunk_scores[c] = static_cast<float>(sum / static_cast<double>(end - begin));
  }
  std::vector<int32_t> kept;
  for (int32_t c : top_k(chunk_scores, n_chunks)) {
    for (int64_t j = c * chunk; j < std::min(n, (c + 1) * chunk); ++j) kept.push_back(static_cast<int32_t>(j));
  }
  return kept;
}

std::vector<int32_t> complement(const std::vector<int32_t>& indices, int64_t n) {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(0, n - static_cast<int64_t>(indices.size()))));
  int32_t from = 0;
  for (int32_t i : indices) {
    if (i < from || i >= n) fail("internal: the indices to leave out are not strictly increasing below {}", n);
    for (; from < i; ++from) out.push_back(from);
    from = i + 1;
  }
  for (; from < n; ++from) out.push_back(from);
  return out;
}

std::vector<int32_t> merge_indices(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out;
  out.reserve(a.size() + b.size());
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<int32_t> index_range(int64_t begin, int64_t end) {
  std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
  std::iota(out.begin(), out.end(), static_cast<int32_t>(begin));
  return out;
}

}  // namespace deferkv
