#pragma once
// A named evaluation protocol: a fixed grid of `deferkv eval` sweeps and one table and plot
// across them. `kvpress` is NVIDIA/kvpress's leaderboard (evaluation/leaderboard.sh):
// RULER at 4K, compression ratios 0.25, 0.5, 0.75 and 0.875, every press question-agnostic
// and a few also question-aware, greedy, the full cache as the ceiling, the score of a press
// at a ratio the unweighted mean of the RULER tasks' scores (docs/evaluation.md).
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "deferkv/eval_run.h"

namespace deferkv::eval {

enum class EvalProtocol {
  kKvpress,
};
// "kvpress"; anything else is an error listing the known ones.
EvalProtocol eval_protocol_from_name(const std::string& name);

// The presses of the kvpress protocol's two sweeps ("full" not among them: it runs once, as
// the ceiling).
struct KvpressPresses {
  std::vector<std::string> agnostic;  // question-agnostic: every press
  std::vector<std::string> aware;     // question-aware: those kvpress also runs so
};

// kvpress's four compression ratios.
const std::vector<double>& kvpress_ratios();

// `given` empty: every method of press_catalogue() that takes a budget and builds with its
// defaults at a ratio, so runs on any model without a file made for it (not compresskv's
// profile, lookaheadkv's weights; nor speckv's draft model unless `have_draft_model`), and
// deferkv:d=4 beside deferkv. Otherwise the given specs ("full" dropped; an unknown press or
// parameter is make_press's error naming it). The question-aware set is the given presses
// whose method is one kvpress runs question-aware (snapkv, adakv (kvpress's adakv_snapkv),
// chunkkv, finch) or deferkv.
KvpressPresses kvpress_presses(const std::vector<std::string>& given, bool have_draft_model);

// The rows one sample per task costs (the full cache once, every press at every ratio).
int64_t kvpress_rows_per_sample(const KvpressPresses& presses, size_t tasks, size_t ratios);
// Samples per task when none are given: as many as fit kKvpressDefaultRows rows, at least 1.
constexpr int64_t kKvpressDefaultRows = 1600;
int64_t kvpress_default_samples(const KvpressPresses& presses, size_t tasks, size_t ratios);

struct ProtocolOutcome {
  std::string dir;  // the protocol's folder: the leaderboard files and its sweeps' folders
  EvalOutcome agnostic, aware;  // aware.dir empty when no press runs question-aware
  int64_t samples_run = 0;
  int64_t failed_rows = 0;
  bool interrupted = false;
  bool whole = true;   // not one shard of several: the leaderboard was written
  std::string table;   // the leaderboard as Markdown; empty for a shard
};

// Runs the kvpress protocol with `base`'s model, decoding, threads, tasks, data files and
// shard: `base.presses` as given to kvpress_presses (the default list when it is {} or
// {"full"}), `base.ratios` (empty: kvpress_ratios()), `base.samples` (0: the default),
// `base.lengths` (empty: 4096). bench must be ruler, and budgets and question_agnostic unset:
// the protocol sets them. In `base.output`/`base.name` (default kvpress-<model stem>) it
// makes the question-agnostic sweep's results folder (with the full cache) and the
// question-aware one's, each resumable as any eval sweep, and writes leaderboard.md, .csv,
// .json and leaderboard.svg (and .png when a converter is installed).
ProtocolOutcome run_kvpress_protocol(const EvalRequest& base, std::FILE* progress,
                                     const std::function<bool()>& stop_requested = {},
                                     const RemoteRunnerFactory& remote = {});

}  // namespace deferkv::eval
