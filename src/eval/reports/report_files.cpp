// The report files of a sweep: summary.md (for reading), results.csv (tidy, for pandas and
// spreadsheets),
// summary.json (for scripts, with the configuration), and the plots: NIAH heat maps, cost
// bars, score vs budget.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/eval_sweep.h"
#include "deferkv/generate.h"
#include "eval/plots/cost_bars.h"
#include "eval/plots/kept_map.h"
#include "eval/plots/niah_heatmap.h"
#include "eval/plots/plot_style.h"
#include "eval/plots/png_export.h"
#include "eval/plots/score_budget_plot.h"
#include "eval/plots/turn_plot.h"
#include "eval/reports/summary.h"
#include "eval/reports/turn_summary.h"
#include "eval/sweep/sample_log.h"

namespace deferkv::eval {
namespace {

using nlohmann::ordered_json;

std::string score_text(const std::optional<double>& score) { return score ? fmt::format("{:.2f}", *score) : "—"; }

std::string mib(double bytes) { return fmt::format("{:.2f}", bytes / 1048576.0); }

std::string decoding_text(const ordered_json& d) {
  if (!d.is_object() || d.value("temperature", 0.0) <= 0) return "greedy";
  // top_k as written: value<int>() of a float such as 1e300 would convert it out of range.
  return fmt::format("sampled, temperature {}, top-k {}, top-p {}, min-p {}", d.value("temperature", 0.0),
                     d.value("top_k", ordered_json(0)).dump(), d.value("top_p", 1.0), d.value("min_p", 0.0));
}

// Each table's scores and its cost table, "## title (question mode)" first.
std::string tables_markdown(const Summary& summary) {
  std::ostringstream md;
  for (const SummaryTable& table : summary.tables) {
    md << "\n## " << table.title << " (" << question_mode_name(summary.question_agnostic) << ")\n\n| method |";
    for (const std::string& c : table.columns) md << ' ' << c << " |";
    md << " Avg. |\n| --- |";
    for (size_t i = 0; i <= table.columns.size(); ++i) md << " ---: |";
    md << '\n';
    for (const SummaryRow& row : table.rows) {
      md << "| " << row.label << " |";
      for (size_t i = 0; i < row.scores.size(); ++i) {
        md << ' ' << (!row.scores[i] && row.failed[i] > 0 ? "failed" : score_text(row.scores[i])) << " |";
      }
      md << ' ' << score_text(row.average) << " |\n";
    }
    for (const SummaryRow& row : table.rows) {
      int64_t failed = 0;
      for (int64_t n : row.failed) failed += n;
      if (failed > 0) md << fmt::format("\n{}: {} failed row(s): {}\n", row.label, failed, row.error);
    }
    md << "\n| method | samples | prompt tokens | prefill s | decode tok/s | capture s | eviction s | "
          "KV after eviction MiB | peak KV MiB | pool per head | peak RSS MiB |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const SummaryRow& row : table.rows) {
      const MethodCost& c = row.cost;
      // pool per head: a deferred press's candidate pool (DeferKV's pool=P), held until step d.
      md << fmt::format("| {} | {} | {:.0f} | {:.3f} | {:.1f} | {:.4f} | {:.4f} | {} | {} | {} | {} |\n", row.label,
                        c.samples, c.prompt_tokens, c.prefill_seconds, c.decode_tokens_per_second, c.capture_seconds,
                        c.eviction_seconds, c.kv_bytes_after_eviction ? mib(*c.kv_bytes_after_eviction) : "—",
                        mib(static_cast<double>(c.peak_kv_bytes)),
                        c.candidate_pool ? std::to_string(*c.candidate_pool) : "—",
                        c.peak_rss_bytes > 0 ? mib(static_cast<double>(c.peak_rss_bytes)) : "—");
    }
  }
  return md.str();
}

std::string markdown(const Summary& summary, const ordered_json& config) {
  std::ostringstream md;
  const bool niah = summary.benchmark == Benchmark::kNiah;
  const bool longbench = summary.benchmark == Benchmark::kLongBench;
  md << (niah ? "# Needle-in-a-Haystack results\n\n" : longbench ? "# LongBench results\n\n" : "# RULER results\n\n");
  if (config.contains("model")) {
    md << fmt::format("- model: `{}` (sha256 `{}`)\n", config["model"].value("path", ""),
                      config["model"].value("sha256", ""));
  }
  md << fmt::format("- chat format: {}\n", config.value("chat_template", ordered_json()).is_string()
                                               ? config["chat_template"].get<std::string>()
                                               : std::string("none (plain prompts)"));
  md << fmt::format("- decoding: {}; seed {}\n", decoding_text(config.value("decoding", ordered_json())),
                    config.value("seed", ordered_json(0)).dump());
  if (config.contains("kv_cache")) {
    md << fmt::format("- KV cache storage: keys {}, values {}\n", config["kv_cache"].value("type_k", ""),
                      config["kv_cache"].value("type_v", ""));
  }
  md << fmt::format("- compression: {}\n", summary.question_agnostic
                                               ? "question-agnostic (each press compressed the context before the "
                                                 "question was read; docs/compression.md)"
                                               : "question-aware (each press compressed context and question "
                                                 "together; docs/compression.md)");
  for (const auto& m : config.value("sweep", ordered_json::object()).value("methods", ordered_json::array())) {
    md << fmt::format("- `{}`: {}\n", m.value("label", ""), m.value("description", ""));
  }
  md << (niah        ? "\nScores: ROUGE-1 F between needle and answer, x 100 (0-100); Avg. is the mean over all cells.\n"
         : longbench ? "\nScores: each dataset's official metric (eval.py), 0-100; Avg. is the unweighted mean over datasets.\n"
                     : "\nScores: RULER's string_match_all (string_match_part for qa), 0-100; Avg. is the mean over tasks.\n");
  md << tables_markdown(summary);
  for (const NiahGrid& grid : summary.grids) {
    md << fmt::format("\n![{0}](niah-{1}.svg)\n", grid.label, file_label(grid.label));
  }
  md << "\n## Plots\n\n";
  if (score_budget_svg(summary)) md << "![score vs budget](score-vs-budget.svg)\n\n";
  md << "![memory and latency](cost-bars.svg)\n";
  return md.str();
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// "64" → 64 entries per head, "r0.5" → compression ratio 0.5 (SweepMethod::budget_label).
struct BudgetNumbers {
  std::optional<int64_t> per_head;
  std::optional<double> ratio;
};

BudgetNumbers budget_numbers(const std::string& label) {
  if (label.empty()) return {};
  if (label.front() == 'r') return {std::nullopt, std::stod(label.substr(1))};
  return {std::stoll(label), std::nullopt};
}

// results.csv: tidy, one line per (method, task, length), for pandas and spreadsheets:
// RULER from the per-length tables, NIAH's lengths as its columns (task "niah"), LongBench's
// datasets (no length). The cost columns are the row's: per method and length for RULER,
// per method for NIAH and LongBench.
std::string tidy_csv(const Summary& summary) {
  std::ostringstream out;
  out << "label,method,kv_budget,kv_ratio,question_agnostic,task,length,score,samples,prompt_tokens,prefill_seconds,"
         "decode_tokens_per_second,capture_seconds,eviction_seconds,kv_bytes_after_eviction,peak_kv_bytes,peak_rss_bytes,failed,error\n";
  const bool niah = summary.benchmark == Benchmark::kNiah;
  for (const SummaryTable& table : summary.tables) {
    if (summary.benchmark == Benchmark::kRuler && !table.length) continue;  // averages of the others
    for (const SummaryRow& row : table.rows) {
      const BudgetNumbers budget = budget_numbers(row.budget);
      const MethodCost& c = row.cost;
      for (size_t i = 0; i < table.columns.size(); ++i) {
        const std::string task = niah ? "niah" : table.columns[i];
        const std::string length = niah ? table.columns[i] : table.length ? std::to_string(*table.length) : "";
        out << csv_field(row.label) << ',' << csv_field(row.method) << ','
            << (budget.per_head ? std::to_string(*budget.per_head) : "") << ','
            << (budget.ratio ? fmt::format("{}", *budget.ratio) : "") << ','
            << (summary.question_agnostic ? "true" : "false") << ',' << csv_field(task) << ',' << length << ','
            << (row.scores[i] ? fmt::format("{:.2f}", *row.scores[i]) : "") << ',' << row.counts[i]
            << fmt::format(",{:.1f},{:.6f},{:.3f},{:.6f},{:.6f},{},{},{},{},", c.prompt_tokens, c.prefill_seconds,
                           c.decode_tokens_per_second, c.capture_seconds, c.eviction_seconds,
                           c.kv_bytes_after_eviction ? fmt::format("{:.0f}", *c.kv_bytes_after_eviction) : "",
                           c.peak_kv_bytes, c.peak_rss_bytes > 0 ? std::to_string(c.peak_rss_bytes) : "",
                           row.failed[i])
            << (row.failed[i] > 0 ? csv_field(row.error) : "") << '\n';
      }
    }
  }
  return out.str();
}

ordered_json optional_number(const std::optional<double>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }

ordered_json json_summary(const Summary& summary, const ordered_json& config, const ordered_json& run) {
  ordered_json tables = ordered_json::array();
  for (const SummaryTable& table : summary.tables) {
    ordered_json rows = ordered_json::array();
    for (const SummaryRow& row : table.rows) {
      ordered_json scores = ordered_json::object();
      ordered_json failed = ordered_json::object();
      for (size_t i = 0; i < table.columns.size(); ++i) {
        scores[table.columns[i]] = optional_number(row.scores[i]);
        failed[table.columns[i]] = row.failed[i];
      }
      const MethodCost& c = row.cost;
      const BudgetNumbers budget = budget_numbers(row.budget);
      rows.push_back({{"label", row.label},
                      {"method", row.method},
                      {"kv_budget", budget.per_head ? ordered_json(*budget.per_head) : ordered_json(nullptr)},
                      {"kv_ratio", budget.ratio ? ordered_json(*budget.ratio) : ordered_json(nullptr)},
                      {"scores", scores},
                      {"average", optional_number(row.average)},
                      {"failed", failed},
                      {"error", row.error.empty() ? ordered_json(nullptr) : ordered_json(row.error)},
                      {"cost",
                       {{"samples", c.samples},
                        {"prompt_tokens", c.prompt_tokens},
                        {"prefill_seconds", c.prefill_seconds},
                        {"decode_tokens_per_second", c.decode_tokens_per_second},
                        {"capture_seconds", c.capture_seconds},
                        {"eviction_seconds", c.eviction_seconds},
                        {"kv_bytes_after_eviction", optional_number(c.kv_bytes_after_eviction)},
                        {"peak_kv_bytes", c.peak_kv_bytes},
                        {"candidate_pool", c.candidate_pool ? ordered_json(*c.candidate_pool) : ordered_json(nullptr)},
                        {"peak_rss_bytes", c.peak_rss_bytes}}}});
    }
    tables.push_back({{"title", table.title},
                      {"length", table.length ? ordered_json(*table.length) : ordered_json(nullptr)},
                      {"columns", table.columns},
                      {"rows", rows}});
  }
  ordered_json out = {{"benchmark", benchmark_name(summary.benchmark)},
                      {"question_agnostic", summary.question_agnostic},
                      {"config", config},
                      {"run", run},
                      {"tables", tables}};
  if (!summary.grids.empty()) {
    ordered_json grids = ordered_json::array();
    for (const NiahGrid& g : summary.grids) {
      ordered_json cells = ordered_json::array();
      for (const auto& row : g.cells) {
        ordered_json r = ordered_json::array();
        for (const auto& cell : row) r.push_back(optional_number(cell));
        cells.push_back(r);
      }
      grids.push_back({{"label", g.label}, {"lengths", g.lengths}, {"depths", g.depths}, {"scores", cells},
                       {"average", optional_number(g.average)}});
    }
    out["niah_grids"] = grids;
  }
  return out;
}

// The records of every samples file in `dir`, the first of each key (a row two processes ran
// into different files at once counts once).
std::vector<nlohmann::json> folder_records(const std::string& dir) {
  std::vector<nlohmann::json> records;
  std::set<std::string> keys;
  for (const std::string& file : SampleLog::files_in(dir)) {
    for (nlohmann::json& record : SampleLog::read(file)) {
      if (keys.insert(SampleLog::key_of(record)).second) records.push_back(std::move(record));
    }
  }
  return records;
}

// The failed rows of every failures file in `dir`, in file order (summarize keeps a key's last).
std::vector<nlohmann::json> folder_failures(const std::string& dir) {
  std::vector<nlohmann::json> failures;
  for (const std::string& file : SampleLog::files_in(dir, "failures")) {
    for (nlohmann::json& record : SampleLog::read(file, RecordKind::kFailure)) failures.push_back(std::move(record));
  }
  return failures;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    if (!out) fail("cannot write '{}'", temporary.string());
  }
  std::filesystem::rename(temporary, path);
}

// Each plot also as PNG when a converter is installed; said on stderr when not.
void write_pngs(const std::vector<std::filesystem::path>& svgs) {
  const std::optional<std::string> converter = find_svg_converter();
  if (!converter) {
    fmt::print(stderr, "note: no rsvg-convert, inkscape or convert on PATH; plots written as SVG only\n");
    return;
  }
  for (const std::filesystem::path& svg : svgs) {
    const std::filesystem::path png = std::filesystem::path(svg).replace_extension(".png");
    if (!svg_to_png(*converter, svg.string(), png.string())) {
      fmt::print(stderr, "warning: {} could not make {}; that plot is SVG only\n", *converter, png.string());
    }
  }
}

// The kept-token maps deferkv eval drew (kept-<label>.svg, one sample per compressed row).
std::string kept_maps_markdown(const SweepPlan& plan, const std::filesystem::path& folder) {
  std::string md;
  for (const SweepMethod& m : plan.methods) {
    const std::string file = kept_map_file(m.label());
    if (std::filesystem::exists(folder / file)) md += fmt::format("\n![kept positions of {}]({})\n", m.label(), file);
  }
  return md.empty() ? md : "\n## Kept positions (the first sample of each row)\n" + md;
}

}  // namespace

std::string write_reports(const SweepPlan& plan, const std::string& dir, const ordered_json& run) {
  const std::filesystem::path folder(dir);
  std::ifstream config_in(folder / "config.json", std::ios::binary);
  const ordered_json config = ordered_json::parse(config_in, nullptr, false);
  if (config.is_discarded()) fail("'{}' has no readable config.json", dir);
  Summary summary = summarize(plan, folder_records(dir), folder_failures(dir));
  std::string summary_md;
  try {  // config.json is ours, but may have been edited: a field of the wrong type is named
    summary.question_agnostic = config.value("question_agnostic", false);
    summary_md = markdown(summary, config);
  } catch (const nlohmann::json::exception& e) {
    fail("'{}': a field of config.json has the wrong type: {}", (folder / "config.json").string(), e.what());
  }
  // Shared contexts (Q questions a context): the score of each turn, and its plot.
  const std::optional<TurnSummary> turns = summarize_turns(plan, folder_records(dir), config);
  if (turns) summary_md += turn_markdown(*turns);
  write_file(folder / "summary.md", summary_md + kept_maps_markdown(plan, folder));
  write_file(folder / "results.csv", tidy_csv(summary));
  ordered_json summary_json = json_summary(summary, config, run);
  if (turns) summary_json["turns"] = turn_json(*turns);
  write_file(folder / "summary.json", summary_json.dump(2) + "\n");
  std::vector<std::filesystem::path> plots;
  const auto plot = [&](const std::string& name, const std::string& svg) {
    write_file(folder / name, svg);
    plots.push_back(folder / name);
  };
  if (turns) plot("score-by-turn.svg", turn_score_svg(*turns));
  for (const NiahGrid& grid : summary.grids) plot("niah-" + file_label(grid.label) + ".svg", niah_heatmap_svg(grid));
  if (const auto svg = score_budget_svg(summary)) plot("score-vs-budget.svg", *svg);
  plot("cost-bars.svg", cost_bars_svg(summary));
  for (const SweepMethod& m : plan.methods) {  // drawn by deferkv eval as it ran the rows
    const std::filesystem::path kept = folder / kept_map_file(m.label());
    if (std::filesystem::exists(kept)) plots.push_back(kept);
  }
  write_pngs(plots);
  return tables_markdown(summary) + (turns ? turn_markdown(*turns) : "");
}

int64_t failed_rows(const SweepPlan& plan, const std::string& dir, Shard shard) {
  const std::vector<nlohmann::json> failures =
      shard.whole() ? folder_failures(dir) : SampleLog::read(dir + "/" + shard.log_name("failures"), RecordKind::kFailure);
  return summarize(plan, folder_records(dir), failures).failed;
}

}  // namespace deferkv::eval
