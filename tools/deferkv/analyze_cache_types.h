#pragma once
// `deferkv analyze cache-types`: the mean KL divergence of next-token distributions with
// each KV-cache storage type against an f32 cache, over a prompt.
#include <CLI/CLI.hpp>

namespace deferkv::cli {

void add_analyze_cache_types_command(CLI::App& analyze);

}  // namespace deferkv::cli
