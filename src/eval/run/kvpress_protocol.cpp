// deferkv eval --protocol kvpress: kvpress's leaderboard (evaluation/leaderboard.sh and
// evaluate.py in NVIDIA/kvpress) as two `deferkv eval` sweeps and one table and plot.
//
// What kvpress does, and what this runs:
// - RULER at 4096 tokens, its 13 tasks with 500 samples each (RULER's prepare.py,
//   --num_samples 500); here the tasks deferkv has data for (qa_1/qa_2 need --squad /
//   --hotpotqa), --samples per task (default below), sized in the model's own tokens.
// - Compression ratios 0.25, 0.5, 0.75 and 0.875: each KV head keeps int(T (1 − r)) of a
//   T-token prompt (KvBudget::ratio), the full cache ("no_press") once as the reference.
// - Every press question-agnostic (its default, query_aware false: the context is compressed,
//   then the question, the chat turn's end and the answer prefix are read on the compressed
//   cache) and snapkv, adakv_snapkv, finch and chunkkv also question-aware (query_aware:
//   the question joins the context before compression).
// - Greedy decoding, RULER's tokens to generate per task (kvpress's MAX_NEW_TOKENS are
//   RULER's), string_match_all (string_match_part for qa) × 100; the leaderboard's score of
//   a press at a ratio is the mean over the tasks.
// [OUR FORMULATION] Question-aware here compresses the whole prompt, the answer prefix and
// the assistant's opening included (kvpress reads those after the compression); deferkv and
// deferkv:d=4 join the question-aware set (DeferKV's decode queries read the question in
// both modes, the comparison its issue asks for); the full cache runs once, in the
// question-agnostic sweep (with nothing evicted the modes differ only in how the prompt is
// split into forward passes).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "deferkv/eval_metrics.h"
#include "deferkv/eval_protocol.h"
#include "deferkv/eval_tasks.h"
#include "eval/plots/leaderboard_plot.h"
#include "eval/plots/png_export.h"
#include "eval/reports/leaderboard.h"
#include "press/registry.h"

namespace deferkv::eval {
namespace {

using nlohmann::ordered_json;

constexpr int64_t kKvpressLength = 4096;

// kvpress's leaderboard.sh, "Loop 2: presses requiring to compress questions": snapkv,
// adakv_snapkv (deferkv's adakv is AdaKV's allocation on SnapKV's scores), finch, chunkkv;
// and deferkv [OUR FORMULATION].
constexpr std::string_view kQuestionAwareMethods[] = {"snapkv", "adakv", "chunkkv", "finch", "deferkv"};

bool runs_question_aware(const std::string& spec) {
  if (spec.find('+') != std::string::npos) return false;  // a composition: kvpress runs none so
  const std::string method = spec.substr(0, spec.find(':'));
  return std::find(std::begin(kQuestionAwareMethods), std::end(kQuestionAwareMethods), method) !=
         std::end(kQuestionAwareMethods);
}

// The tasks run_eval runs for `r`: RULER's 13 without the QA tasks whose data file is not
// given, or those named.
size_t task_count(const EvalRequest& r) {
  if (!r.tasks.empty()) return r.tasks.size();
  return ruler_tasks().size() - (r.squad.empty() ? 1 : 0) - (r.hotpotqa.empty() ? 1 : 0);
}

const ordered_json& field(const ordered_json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) fail("no field '{}'", key);
  return object.at(key);
}

// A sweep's summary.json (write_reports) read into the leaderboard: its last table (the only
// one at one length, the average over lengths at several), the full cache as the ceiling,
// every other row at its ratio on the line of its press and `question_agnostic`.
void read_sweep(const std::string& dir, bool question_agnostic, Leaderboard& board, std::vector<std::string>& tasks) {
  const std::filesystem::path path = std::filesystem::path(dir) / "summary.json";
  std::ifstream in(path, std::ios::binary);
  const ordered_json summary = ordered_json::parse(in, nullptr, false);
  if (summary.is_discarded()) fail("'{}' is not readable JSON", path.string());
  try {
    const ordered_json& tables = field(summary, "tables");
    if (!tables.is_array() || tables.empty()) fail("no table");
    tasks = field(tables.front(), "columns").get<std::vector<std::string>>();
    for (const ordered_json& row : field(tables.back(), "rows")) {
      const std::string press = field(row, "method").get<std::string>();
      const ordered_json& average = field(row, "average");
      const std::optional<double> score = average.is_null() ? std::nullopt : std::optional(average.get<double>());
      if (press == "full") {
        board.full = score;
        continue;
      }
      const ordered_json& ratio = field(row, "kv_ratio");
      if (ratio.is_null()) continue;
      const auto r = std::find(board.ratios.begin(), board.ratios.end(), ratio.get<double>());
      if (r == board.ratios.end()) continue;
      const size_t i = static_cast<size_t>(r - board.ratios.begin());
      auto line = std::find_if(board.lines.begin(), board.lines.end(), [&](const LeaderboardLine& l) {
        return l.press == press && l.question_agnostic == question_agnostic;
      });
      if (line == board.lines.end()) {
        line = board.lines.insert(board.lines.end(), {press, question_agnostic,
                                                      std::vector<std::optional<double>>(board.ratios.size()),
                                                      std::vector<int64_t>(board.ratios.size()), "", std::nullopt});
      }
      line->scores[i] = score;
      for (const auto& [task, n] : field(row, "failed").items()) line->failed[i] += n.get<int64_t>();
      if (line->error.empty() && field(row, "error").is_string()) line->error = row.at("error").get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    fail("'{}': a field has the wrong type: {}", path.string(), e.what());
  } catch (const Error& e) {
    fail("'{}': {}", path.string(), e.what());
  }
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) fail("cannot write '{}'", path.string());
}

}  // namespace

EvalProtocol eval_protocol_from_name(const std::string& name) {
  if (name == "kvpress") return EvalProtocol::kKvpress;
  fail("unknown protocol '{}' (known: kvpress)", name);
}

const std::vector<double>& kvpress_ratios() {
  static const std::vector<double> ratios = {0.25, 0.5, 0.75, 0.875};
  return ratios;
}

KvpressPresses kvpress_presses(const std::vector<std::string>& given, bool have_draft_model) {
  KvpressPresses out;
  const KvBudget probe = KvBudget::ratio(0.5);
  if (given.empty() || given == std::vector<std::string>{"full"}) {
    for (const PressInfo& info : press_catalogue()) {
      if (!info.uses_budget) continue;  // "full", decode-time presses: no ratio to run at
      // A press that needs a file made for one model (compresskv's profile, which it
      // cannot build without, and lookaheadkv's weights, which only some models have beside
      // them): a user names it.
      try {
        make_press(info.name, probe);
      } catch (const Error&) {
        continue;
      }
      if (press_runs_learned_rows(info.name)) continue;
      if (!have_draft_model && press_needs_draft_model(info.name)) continue;
      out.agnostic.push_back(info.name);
      if (info.name == "deferkv") out.agnostic.emplace_back("deferkv:d=4");
    }
  } else {
    for (const std::string& spec : given) {
      if (spec == "full") continue;  // the ceiling runs anyway
      make_press(spec, probe);       // an unknown press or parameter: its error, before anything runs
      if (std::find(out.agnostic.begin(), out.agnostic.end(), spec) == out.agnostic.end()) out.agnostic.push_back(spec);
    }
  }
  for (const std::string& spec : out.agnostic) {
    if (runs_question_aware(spec)) out.aware.push_back(spec);
  }
  return out;
}

int64_t kvpress_rows_per_sample(const KvpressPresses& presses, size_t tasks, size_t ratios) {
  return static_cast<int64_t>(tasks * (1 + ratios * (presses.agnostic.size() + presses.aware.size())));
}

int64_t kvpress_default_samples(const KvpressPresses& presses, size_t tasks, size_t ratios) {
  const int64_t rows = kvpress_rows_per_sample(presses, tasks, ratios);
  return std::max<int64_t>(1, rows > 0 ? kKvpressDefaultRows / rows : 1);
}

ProtocolOutcome run_kvpress_protocol(const EvalRequest& base, std::FILE* progress,
                                     const std::function<bool()>& stop_requested, const RemoteRunnerFactory& remote) {
  if (base.bench != "ruler") fail("--protocol kvpress runs RULER; --bench {} is not for it", base.bench);
  if (!base.budgets.empty()) fail("--protocol kvpress runs at compression ratios (--kv-ratio), not --kv-budget");
  if (base.question_agnostic) {
    fail("--protocol kvpress runs both question modes itself; --question-agnostic is not for it");
  }
  if (!base.depths.empty()) fail("--depths is for --bench niah");
  const std::vector<double> ratios = base.ratios.empty() ? kvpress_ratios() : base.ratios;
  for (double r : ratios) {
    if (!(r >= 0 && r < 1)) fail("--kv-ratio: {} is not a compression ratio in [0, 1)", r);
  }
  if (base.name == "latest" || base.name == "." || base.name == ".." || base.name.find('/') != std::string::npos) {
    fail("--name '{}' is not a folder name (no '/', not '.', '..' or 'latest')", base.name);
  }
  for (const std::string& t : base.tasks) ruler_tokens_to_generate(t);  // unknown: an error listing the 13
  const KvpressPresses presses = kvpress_presses(base.presses, !base.draft_model.empty());
  if (presses.agnostic.empty()) fail("--protocol kvpress: no press to compare with the full cache");
  const size_t tasks = task_count(base);
  const int64_t samples = base.samples > 0 ? base.samples : kvpress_default_samples(presses, tasks, ratios.size());
  const std::string model = base.model.empty() ? embedded_eval_model_path() : base.model;
  const std::vector<int64_t> lengths = base.lengths.empty() ? std::vector<int64_t>{kKvpressLength} : base.lengths;

  ProtocolOutcome outcome;
  const std::string name = base.name.empty() ? "kvpress-" + std::filesystem::path(model).stem().string() : base.name;
  outcome.dir = (std::filesystem::path(base.output) / name).string();
  if (progress != nullptr) {
    fmt::print(progress,
               "kvpress protocol: RULER at {} tokens, {} task(s) x {} sample(s), ratios {}; {} press(es) "
               "question-agnostic and the full cache, {} question-aware ({}); {} rows in {}\n",
               fmt::join(lengths, ", "), tasks, samples, fmt::join(ratios, ", "), presses.agnostic.size(),
               presses.aware.size(), fmt::join(presses.aware, ", "),
               samples * kvpress_rows_per_sample(presses, tasks, ratios.size()) * static_cast<int64_t>(lengths.size()),
               outcome.dir);
  }

  EvalRequest sweep = base;
  sweep.model = model;
  sweep.lengths = lengths;
  sweep.ratios = ratios;
  sweep.samples = samples;
  sweep.output = outcome.dir;
  sweep.name = "";  // each sweep's folder is named by its configuration's hash: a rerun resumes it
  sweep.presses = {"full"};
  sweep.presses.insert(sweep.presses.end(), presses.agnostic.begin(), presses.agnostic.end());
  sweep.question_agnostic = true;
  outcome.agnostic = run_eval(sweep, progress, stop_requested, remote);
  outcome.interrupted = outcome.agnostic.interrupted;
  if (!presses.aware.empty() && !outcome.interrupted) {
    sweep.presses = presses.aware;
    sweep.question_agnostic = false;
    outcome.aware = run_eval(sweep, progress, stop_requested, remote);
    outcome.interrupted = outcome.aware.interrupted;
  }
  outcome.samples_run = outcome.agnostic.samples_run + outcome.aware.samples_run;
  outcome.failed_rows = outcome.agnostic.failed_rows + outcome.aware.failed_rows;
  outcome.whole = Shard::parse(base.shard).whole();
  if (!outcome.whole) return outcome;  // the sweeps' reports wait for every shard: so does the leaderboard
  // Interrupted before the question-aware sweep began: the leaderboard of what is done.
  Leaderboard board;
  board.ratios = ratios;
  board.title = fmt::format("kvpress protocol: RULER at {} tokens", fmt::join(lengths, ", "));
  std::vector<std::string> task_names;
  read_sweep(outcome.agnostic.dir, true, board, task_names);
  if (!outcome.aware.dir.empty()) read_sweep(outcome.aware.dir, false, board, task_names);
  for (LeaderboardLine& line : board.lines) {
    double sum = 0;
    int n = 0;
    for (const auto& s : line.scores) {
      if (s) sum += *s, ++n;
    }
    if (n > 0) line.average = sum / n;
  }
  const auto relative = [&](const std::string& dir) {
    return std::filesystem::path(dir).lexically_relative(outcome.dir).string();
  };
  board.notes = {
      fmt::format("model: `{}`", std::filesystem::absolute(model).string()),
      fmt::format("tasks: {} ({} sample(s) each); greedy; a score is RULER's string_match_all (string_match_part for "
                  "qa) x 100, a cell the mean over the tasks (kvpress's leaderboard average)",
                  fmt::join(task_names, ", "), samples),
      "compression ratio: the share of the prompt's KV entries evicted, each KV head keeping int(T (1 - r)) of a "
      "T-token prompt (kvpress's)",
      fmt::format("question-agnostic (the context compressed before the question is read): [{0}]({0}/summary.md)",
                  relative(outcome.agnostic.dir)),
  };
  if (!outcome.aware.dir.empty()) {
    board.notes.push_back(fmt::format(
        "question-aware (context and question compressed together): [{0}]({0}/summary.md)", relative(outcome.aware.dir)));
  }
  const std::filesystem::path dir(outcome.dir);
  outcome.table = leaderboard_markdown(board);
  write_text(dir / "leaderboard.md", outcome.table);
  write_text(dir / "leaderboard.csv", leaderboard_csv(board));
  ordered_json json = leaderboard_json(board);
  json["protocol"] = "kvpress";
  json["model"] = std::filesystem::absolute(model).string();
  json["lengths"] = lengths;
  json["tasks"] = task_names;
  json["samples"] = samples;
  json["sweeps"] = {{"question_agnostic", relative(outcome.agnostic.dir)},
                    {"question_aware", outcome.aware.dir.empty() ? ordered_json(nullptr) : ordered_json(relative(outcome.aware.dir))}};
  write_text(dir / "leaderboard.json", json.dump(2) + "\n");
  const std::string svg = leaderboard_svg(board);
  write_text(dir / "leaderboard.svg", svg);
  if (const std::optional<std::string> converter = find_svg_converter()) {
    svg_to_png(*converter, (dir / "leaderboard.svg").string(), (dir / "leaderboard.png").string());
  }
  return outcome;
}

}  // namespace deferkv::eval
