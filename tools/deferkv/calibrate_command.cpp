// `deferkv calibrate compresskv`: the offline step of CompressKV on a model, written as
// the profile file that `--press compresskv:profile=FILE` reads.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/thread_pool.h"
#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "eval/calibration/compresskv_calibration.h"

namespace deferkv::cli {
namespace {

struct CalibrateArgs {
  std::string model;
  std::string output;
  int threads = 1;
  std::string probes = "niah";
  eval::CompressKvCalibrationOptions options;
  CacheTypeOptions cache_types;
};

void run_calibrate(CalibrateArgs& args) {
  args.options.probes = eval::calibration_probes_from_name(args.probes);
  if (args.options.probes == eval::CalibrationProbes::kRuler && !args.options.depths.empty()) {
    fail("--depths is for --probes niah; RULER probes take --samples per length");
  }
  auto model = Model::load(args.model);
  int64_t longest = 0;
  for (int64_t l : args.options.lengths) longest = std::max(longest, l);
  SessionOptions options;
  options.n_ctx = longest + args.options.max_new_tokens + 1;
  args.cache_types.apply(options);
  Session session(model, make_thread_pool(args.threads), options);
  const auto result = eval::calibrate_compresskv(session, args.options);
  save_compresskv_profile(args.output, result.profile);
  fmt::print("{} of {} probes answered (KV cache {}); retrieval heads and layer scores written to {}\n",
             result.answered, result.probes, args.cache_types.describe(), args.output);
  for (size_t l = 0; l < result.profile.retrieval_heads.size(); ++l) {
    fmt::print("layer {:>3}: heads {}  score {:.4f}\n", l, fmt::join(result.profile.retrieval_heads[l], ","),
               result.profile.layer_scores[l]);
  }
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Offline calibration of a method on a model (see subcommands)");
  cmd->require_subcommand(1);
  CLI::App* ckv = cmd->add_subcommand(
      "compresskv", "Find the semantic retrieval heads and the layers' error sensitivity on needle probes");
  add_model_option(*ckv, args->model);
  ckv->add_option("-o,--output", args->output, "Profile file to write (JSON)")->required();
  ckv->add_option("--lengths", args->options.lengths, "Probe lengths in tokens")->delimiter(',')->capture_default_str();
  ckv->add_option("--probes", args->probes,
                  "niah: NIAH's needle in Paul Graham's essays; ruler: RULER's S-NIAH-1 (for models trained on "
                  "RULER's wording, as the embedded retrieval model)")
      ->capture_default_str()->check(CLI::IsMember({"niah", "ruler"}));
  ckv->add_option("--depths", args->options.depths, "Needle depths in percent (default 0, 11, ..., 100)")->delimiter(',');
  ckv->add_option("--samples", args->options.samples, "RULER probes per length")->capture_default_str()
      ->check(CLI::PositiveNumber);
  ckv->add_option("--first-k", args->options.first_k, "Retrieval heads kept per layer")->capture_default_str();
  ckv->add_option("--min-recall", args->options.min_recall, "ROUGE-1 recall (x100) an answer needs to count")
      ->capture_default_str();
  add_threads_option(*ckv, args->threads);
  add_cache_type_options(*ckv, args->cache_types);
  ckv->callback([args] { run_calibrate(*args); });
}

}  // namespace deferkv::cli
