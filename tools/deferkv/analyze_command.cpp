// `deferkv analyze consistency`: DeferKV's attention-consistency diagnostics (which
// query position best predicts later decode attention), as a table (Markdown or JSON).
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze_cache_types.h"
#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "eval/analysis/attention_consistency.h"
#include "eval/plots/consistency_plot.h"

namespace deferkv::cli {
namespace {

const std::vector<std::string> kAnalyzeFormats = {"md", "json"};

struct AnalyzeArgs {
  std::string model;
  std::vector<std::string> files;
  std::vector<std::string> prompts;
  int threads = 1;
  int64_t n_ctx = 0;
  ReportOutput output;
  std::string svg;
  eval::ConsistencyOptions options;
  CacheTypeOptions cache_types;
};

void run_consistency(const AnalyzeArgs& args) {
  if (args.files.empty() && args.prompts.empty()) fail("give prompts with -f FILE or -p TEXT");
  validate_report_output(args.output, kAnalyzeFormats);
  auto model = Model::load(args.model);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& f : args.files) prompts.push_back(model->tokenizer().encode(read_text_file(f), true, false));
  for (const auto& p : args.prompts) prompts.push_back(model->tokenizer().encode(p, true, false));
  SessionOptions options;
  options.n_ctx = args.n_ctx;
  args.cache_types.apply(options);
  Session session(model, make_thread_pool(args.threads), options);
  const eval::ConsistencyReport report = eval::measure_attention_consistency(session, prompts, args.options);
  if (!args.svg.empty()) {
    std::ofstream out(args.svg);
    out << eval::consistency_plot_svg(report);
    if (!out) fail("cannot write '{}'", args.svg);
  }
  if (args.output.format == "json") {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : report.points) points.push_back({{"probe", p.probe}, {"jsd_similarity", p.jsd_similarity}, {"recall", p.recall}});
    write_report(args.output, nlohmann::json{{"samples", report.samples}, {"prompt_tokens", report.prompt_tokens},
                                             {"reference_rows", report.reference_rows}, {"budget", args.options.budget},
                                             {"window", args.options.window}, {"cache_type_k", args.cache_types.keys},
                                             {"cache_type_v", args.cache_types.values}, {"points", points}}
                                      .dump(2) + "\n");
    return;
  }
  std::string text =
      fmt::format("{} prompts ({} tokens), reference: {} later decode steps; recall at B = {} - {}; KV cache {}\n\n",
                  report.samples, report.prompt_tokens, report.reference_rows, args.options.budget, args.options.window,
                  args.cache_types.describe());
  text += "| probe | JSD similarity | top-B recall |\n| --- | ---: | ---: |\n";
  for (const auto& p : report.points) text += fmt::format("| {} | {:.4f} | {:.4f} |\n", p.probe, p.jsd_similarity, p.recall);
  write_report(args.output, text);
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  CLI::App* cmd = app.add_subcommand("analyze", "Diagnostics of attention (see subcommands)");
  cmd->require_subcommand(1);
  CLI::App* consistency = cmd->add_subcommand(
      "consistency", "How well each query position (prompt end, first decode steps) predicts later decode attention");
  add_model_option(*consistency, args->model);
  consistency->add_option("-f,--file", args->files, "Prompt file (repeatable: one sample each)");
  consistency->add_option("-p,--prompt", args->prompts, "Prompt text (repeatable)");
  add_threads_option(*consistency, args->threads);
  add_cache_type_options(*consistency, args->cache_types);
  consistency->add_option("-c,--ctx-size", args->n_ctx, "Context size in tokens");
  consistency->add_option("--prompt-probes", args->options.prompt_probes, "Prompt positions probed")->capture_default_str();
  consistency->add_option("--decode-probes", args->options.decode_probes, "Decode steps probed")->capture_default_str();
  consistency->add_option("--reference-steps", args->options.reference_steps, "Later decode steps forming the reference")
      ->capture_default_str();
  consistency->add_option("--kv-budget,--budget", args->options.budget, "b for top-B recall (B = b - window)")
      ->capture_default_str();
  consistency->add_option("--window", args->options.window, "Observation window")->capture_default_str();
  consistency->add_option("--eta", args->options.eta, "DeferKV discount for the fused row")->capture_default_str();
  add_report_output_options(*consistency, args->output, kAnalyzeFormats);
  consistency->add_option("--svg", args->svg, "Also draw the figure (SVG) to this file");
  consistency->callback([args] { run_consistency(*args); });
  add_analyze_cache_types_command(*cmd);
}

}  // namespace deferkv::cli
