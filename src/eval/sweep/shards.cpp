#include "eval/sweep/shards.h"

#include <algorithm>
#include <numeric>
#include <regex>

#include <fmt/format.h>

#include "deferkv/error.h"

namespace deferkv::eval {

Shard Shard::parse(const std::string& text) {
  static const std::regex form(R"(([0-9]{1,6})/([0-9]{1,6}))");
  std::smatch m;
  if (!std::regex_match(text, m, form)) fail("--shard: '{}' is not i/N (e.g. 1/4)", text);
  const Shard shard{std::stoll(m[1].str()), std::stoll(m[2].str())};
  if (shard.count < 1 || shard.index < 1 || shard.index > shard.count) {
    fail("--shard: '{}' names no shard; i runs from 1 to N", text);
  }
  return shard;
}

std::string Shard::log_name(const std::string& stem) const {
  return whole() ? stem + ".jsonl" : fmt::format("{}.shard-{}-of-{}.jsonl", stem, index, count);
}

std::vector<int64_t> shard_of_rows(const std::vector<int64_t>& costs, int64_t shard_count) {
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<int64_t> shard(costs.size());
  const auto n = shard_count;
  for (size_t k = 0; k < order.size(); ++k) {
    const auto dealt = static_cast<int64_t>(k);
    shard[order[k]] = (dealt + dealt / n) % n + 1;
  }
  return shard;
}

}  // namespace deferkv::eval
