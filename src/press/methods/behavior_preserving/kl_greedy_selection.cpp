#include "press/methods/behavior_preserving/kl_greedy_selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "base/thread_pool.h"

namespace deferkv {
namespace {

struct Member {
  int64_t g, c;
  double cost;  // singleton score, then the KL with this member added
};

bool cheaper(const Member& a, const Member& b) { return std::tie(a.cost, a.g, a.c) < std::tie(b.cost, b.g, b.c); }

int64_t pool_size(double factor, int64_t to_delete, int64_t available) {
  const auto wanted = static_cast<int64_t>(std::ceil(factor * static_cast<double>(to_delete)));
  return std::min(available, std::max(to_delete, wanted));
}

// The pool of step 5a: per head (flexible: per layer) the cheapest singletons, pool_factor
// times as many as are to be deleted there.
std::vector<Member> candidate_pool(const LayerDeletionModel& model, const std::vector<int64_t>& head_quota,
                                   int64_t layer_quota, const KlGreedyOptions& options, ThreadPool& pool) {
  const std::vector<std::vector<float>> scores = model.singleton_scores(pool);
  std::vector<Member> out, layer;
  for (int64_t g = 0; g < model.n_head_kv(); ++g) {
    if (head_quota[g] == 0) continue;
    std::vector<Member> head;
    for (int64_t c = 0; c < static_cast<int64_t>(scores[g].size()); ++c) head.push_back({g, c, scores[g][c]});
    if (options.flexible) {
      layer.insert(layer.end(), head.begin(), head.end());
      continue;
    }
    const int64_t n = pool_size(options.pool_factor, head_quota[g], static_cast<int64_t>(head.size()));
    std::partial_sort(head.begin(), head.begin() + n, head.end(), cheaper);
    out.insert(out.end(), head.begin(), head.begin() + n);
  }
  if (options.flexible) {
    const int64_t n = pool_size(options.pool_factor, layer_quota, static_cast<int64_t>(layer.size()));
    std::partial_sort(layer.begin(), layer.begin() + n, layer.end(), cheaper);
    out.assign(layer.begin(), layer.begin() + n);
  }
  return out;
}

}  // namespace

std::vector<std::vector<int32_t>> choose_deletions(const LayerDeletionModel& model, const std::vector<int64_t>& quota,
                                                   const KlGreedyOptions& options, ThreadPool& pool) {
  const int64_t n_kv = model.n_head_kv();
  // What each head may still lose, and the layer.
  std::vector<int64_t> head_left(static_cast<size_t>(n_kv));
  int64_t layer_left = 0;
  for (int64_t g = 0; g < n_kv; ++g) {
    const auto available = static_cast<int64_t>(model.candidates(g).size());
    head_left[g] = options.flexible ? available : std::clamp<int64_t>(quota[g], 0, available);
    layer_left += options.flexible ? quota[g] : head_left[g];
  }
  layer_left = std::clamp<int64_t>(layer_left, 0, std::accumulate(head_left.begin(), head_left.end(), int64_t{0}));

  std::vector<std::vector<int32_t>> deleted(static_cast<size_t>(n_kv));
  if (layer_left == 0) return deleted;
  // Entries per iteration: per head (flexible: for the layer).
  auto block_for = [&](int64_t quota, int64_t most) {
    return std::clamp<int64_t>((quota + options.min_steps - 1) / options.min_steps, 1, most);
  };
  std::vector<int64_t> head_block(static_cast<size_t>(n_kv));
  for (int64_t g = 0; g < n_kv; ++g) head_block[g] = block_for(head_left[g], options.block);
  const int64_t layer_block = block_for(layer_left, options.block * n_kv);
  std::vector<Member> remaining = candidate_pool(model, head_left, layer_left, options, pool);
  DeletionSet set(model);
  while (layer_left > 0) {
    std::vector<Member> eligible;
    for (const Member& m : remaining) {
      if (head_left[m.g] > 0) eligible.push_back(m);
    }
    if (eligible.empty()) break;
    pool.parallel_for(static_cast<int64_t>(eligible.size()), model.candidates_per_task(), [&](int64_t begin, int64_t end, int) {
      std::vector<float> scratch;
      for (int64_t i = begin; i < end; ++i) eligible[i].cost = set.kl_with(eligible[i].g, eligible[i].c, scratch);
    });
    std::sort(eligible.begin(), eligible.end(), cheaper);
    // This iteration's block, the cheapest first.
    std::vector<int64_t> taken(static_cast<size_t>(n_kv), 0);
    std::vector<std::pair<int64_t, int64_t>> picks;
    for (const Member& m : eligible) {
      if (layer_left == 0 || (options.flexible && static_cast<int64_t>(picks.size()) >= layer_block)) break;
      if (head_left[m.g] == 0 || (!options.flexible && taken[m.g] >= head_block[m.g])) continue;
      picks.emplace_back(m.g, m.c);
      ++taken[m.g];
      --head_left[m.g];
      --layer_left;
      deleted[m.g].push_back(static_cast<int32_t>(m.c));
    }
    set.add(picks);
    std::sort(picks.begin(), picks.end());
    std::erase_if(remaining, [&](const Member& m) {
      return std::binary_search(picks.begin(), picks.end(), std::pair<int64_t, int64_t>(m.g, m.c));
    });
  }
  for (auto& d : deleted) std::sort(d.begin(), d.end());
  return deleted;
}

}  // namespace deferkv
