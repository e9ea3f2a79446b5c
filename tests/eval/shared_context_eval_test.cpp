// eval --questions-per-context Q (issue 44 item 4): Q different questions over one haystack,
// answered through one CompressedContext, independently or as a conversation, scored per
// turn. The answers are checked against today's one-question path on the same prompts, and
// the tokens a turn reads against what the earlier turns read and answered.
#include <algorithm>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deferkv/embedding.h"
#include "deferkv/eval_run.h"
#include "deferkv/eval_sweep.h"
#include "deferkv/eval_tasks.h"
#include "deferkv/model.h"
#include "eval/eval_test_util.h"
#include "eval/run/sample_runner.h"
#include "support/error_of.h"
#include "support/read_file.h"
#include "tokenizer/tokenizer_test_util.h"
#include "tensor/gguf_test_util.h"

namespace deferkv::eval {
namespace {

using testing::error_of;

TaskOptions options_with(int64_t questions) {
  TaskOptions o;
  o.questions_per_context = questions;
  return o;
}

std::vector<int32_t> question_part(const TaskSample& s) {
  return {s.tokens.begin() + s.context_tokens, s.tokens.end()};
}

TEST(SharedContextTasks, QuestionsDifferAreDeterministicAndAskWhatTheHaystackHolds) {
  const TaskGenerator three(test::llama_spm(), options_with(3)), again(test::llama_spm(), options_with(3));
  for (const std::string& task : tasks_with_many_questions()) {
    if (task.starts_with("qa_")) continue;  // below, with their data files
    SCOPED_TRACE(task);
    const TaskSample s = three.ruler(task, 1024, 1);
    ASSERT_EQ(s.turns.size(), 3u);
    // Turn 1 is the sample's own question; every turn asks something else.
    EXPECT_EQ(s.turns[0].question, question_part(s));
    EXPECT_EQ(s.turns[0].references, s.references);
    std::set<std::vector<int32_t>> questions;
    std::set<std::vector<std::string>> answers;
    for (const TaskTurn& t : s.turns) {
      questions.insert(t.question);
      answers.insert(t.references);
      // What a turn asks for is in the one haystack (the needles' values, the chain's variables).
      // (The questions name keys or values, never the answers, so the prompt holds them only there.)
      for (const std::string& r : t.references) EXPECT_NE(s.prompt.find(r), std::string::npos) << r;
    }
    EXPECT_EQ(questions.size(), 3u);
    EXPECT_EQ(answers.size(), 3u);
    if (task.starts_with("niah_multikey")) {
      // Each answer is the value of the needle whose key that turn's question names.
      for (const TaskTurn& t : s.turns) {
        const std::string question = test::llama_spm().decode(t.question);
        const std::string value = t.references.at(0);
        const size_t needle = s.prompt.find(" is: " + value + ".");
        ASSERT_NE(needle, std::string::npos) << value;
        const size_t key_start = s.prompt.rfind(" for ", needle) + 5;
        const std::string key = s.prompt.substr(key_start, needle - key_start);
        EXPECT_NE(question.find(" for " + key + " mentioned"), std::string::npos) << key << " / " << question;
      }
    }
    // The same seed gives the same questions.
    const TaskSample t = again.ruler(task, 1024, 1);
    EXPECT_EQ(t.tokens, s.tokens);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(t.turns[k].question, s.turns[k].question);
      EXPECT_EQ(t.turns[k].references, s.turns[k].references);
    }
  }
}

TEST(SharedContextTasks, OneQuestionIsTodaysSample) {
  const TaskGenerator one(test::llama_spm(), options_with(1)), today(test::llama_spm(), TaskOptions{});
  for (const std::string& task : tasks_with_many_questions()) {
    if (task.starts_with("qa_")) continue;
    const TaskSample a = one.ruler(task, 1024, 2), b = today.ruler(task, 1024, 2);
    EXPECT_EQ(a.tokens, b.tokens) << task;
    EXPECT_TRUE(a.turns.empty()) << task;
  }
}

// QA: sample i asks questions i*Q.. of the dataset over documents holding all their gold ones.
TEST(SharedContextTasks, QaAsksConsecutiveQuestionsOverTheirGoldDocuments) {
  gguf_test::TempDir dir;
  TaskOptions o = options_with(2);
  o.squad_path = eval_test::write_squad(dir.file("squad.json"));
  o.hotpotqa_path = eval_test::write_hotpotqa(dir.file("hotpotqa.json"));
  const TaskGenerator two(test::llama_spm(), o);
  const TaskSample squad = two.ruler("qa_1", 1024, 0);
  ASSERT_EQ(squad.turns.size(), 2u);
  EXPECT_EQ(squad.turns[0].references, std::vector<std::string>{"France"});
  EXPECT_EQ(squad.turns[1].references, (std::vector<std::string>{"Rollo", "Rollo"}));
  EXPECT_EQ(squad.turns[0].question, question_part(squad));
  const std::string context = squad.prompt.substr(0, squad.prompt.find("Question:"));
  EXPECT_NE(context.find("Normandy, a region in France"), std::string::npos);
  EXPECT_NE(context.find("Rollo was the first ruler"), std::string::npos);
  EXPECT_NE(test::llama_spm().decode(squad.turns[1].question).find("Who was the first ruler of Normandy?"),
            std::string::npos);
  const TaskSample hotpot = two.ruler("qa_2", 1024, 0);
  ASSERT_EQ(hotpot.turns.size(), 2u);
  EXPECT_EQ(hotpot.turns[1].references, std::vector<std::string>{"no"});
  EXPECT_NE(hotpot.prompt.find("The Danube crosses ten countries."), std::string::npos);  // question 2's gold
  // Questions 2..3 would be sample 1: squad has three, so it asks for more than there are.
  EXPECT_NE(error_of([&] { two.ruler("qa_1", 1024, 1); }).find("sample 1 (with 2 questions a context)"),
            std::string::npos);
  // One question a context: today's sample.
  TaskOptions today = o;
  today.questions_per_context = 1;
  EXPECT_EQ(TaskGenerator(test::llama_spm(), today).ruler("qa_1", 1024, 0).tokens,
            [&] {
              TaskOptions plain;
              plain.squad_path = o.squad_path;
              return TaskGenerator(test::llama_spm(), plain).ruler("qa_1", 1024, 0).tokens;
            }());
}

TEST(SharedContextTasks, TasksThatCannotAskSeveralQuestionsAreRefusedByName) {
  const TaskGenerator two(test::llama_spm(), options_with(2));
  for (const char* task : {"niah_single_1", "niah_single_3", "cwe", "fwe"}) {
    const std::string error = error_of([&] { two.ruler(task, 1024, 0); });
    EXPECT_NE(error.find(task), std::string::npos) << error;
    EXPECT_NE(error.find("niah_multikey_1"), std::string::npos) << error;  // the tasks that can
  }
  EXPECT_NE(error_of([&] { two.niah(1024, 50); }).find("niah holds one needle"), std::string::npos);
  const std::string zero = error_of([] { TaskGenerator(test::llama_spm(), options_with(0)); });
  EXPECT_NE(zero.find("at least 1, got 0"), std::string::npos) << zero;
}

// The in-house model's runs: a context compressed once, three questions.
struct ModelRuns {
  std::shared_ptr<const Model> model = Model::load(embedded_eval_model_path());
  std::shared_ptr<ThreadPool> pool = make_thread_pool(1);
  TaskSample sample = TaskGenerator(model->tokenizer(), options_with(3)).ruler("niah_multikey_2", 512, 0);

  SampleRunner runner(bool question_agnostic, TurnMode mode) const {
    return SampleRunner(model, nullptr, pool, EvalRequest::greedy(), SessionOptions{}, question_agnostic, nullptr, mode);
  }
  // Today's one-question sample: the same context, `question` after it.
  TaskSample single(const std::vector<int32_t>& question) const {
    TaskSample s = sample;
    s.tokens.resize(static_cast<size_t>(s.context_tokens));
    s.tokens.insert(s.tokens.end(), question.begin(), question.end());
    s.turns.clear();
    return s;
  }
};

const ModelRuns& runs() {
  static const ModelRuns r;
  return r;
}

TEST(SharedContextRuns, IndependentTurnsAnswerAsTodaysEvalOfEachQuestion) {
  const ModelRuns& r = runs();
  const SweepMethod knorm{"knorm", KvBudget::per_head(48), "48"};  // question-agnostic by nature
  const SampleRunner turns = r.runner(true, TurnMode::kIndependent), today = r.runner(true, TurnMode::kIndependent);
  const SampleRun run = turns(knorm, r.sample);
  ASSERT_EQ(run.turns.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(run.turns[k].read, r.sample.turns[k].question) << k;  // each question alone after the context
    const SampleRun alone = today(knorm, r.single(r.sample.turns[k].question));
    EXPECT_EQ(run.turns[k].prediction, alone.prediction) << k;
    EXPECT_GT(alone.generated_tokens, 0);
  }
  EXPECT_EQ(run.prediction, run.turns[0].prediction);
  EXPECT_EQ(run.prefill_tokens_saved, 2 * r.sample.context_tokens);
}

// DeferKV's deferred context (issue 44 item 5): each turn evicts at its own step d, so it
// answers as today's question-agnostic eval of that question alone; the cost is the pool's.
TEST(SharedContextRuns, DeferKvTurnsAnswerAsTodaysEvalOfEachQuestion) {
  const ModelRuns& r = runs();
  const SweepMethod deferkv{"deferkv:d=2,pool=4x", KvBudget::per_head(48), "48"};
  const SampleRunner turns = r.runner(true, TurnMode::kIndependent);
  const SampleRun run = turns(deferkv, r.sample);
  ASSERT_EQ(run.turns.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const SampleRun alone = turns(deferkv, r.single(r.sample.turns[k].question));
    EXPECT_EQ(run.turns[k].prediction, alone.prediction) << k;
  }
  // The context's pool: 4 budgets a head, under the whole context.
  const ModelConfig& c = r.model->config();
  const int64_t heads = c.n_layer * c.n_head_kv;
  EXPECT_GT(run.kv_bytes_after_eviction, heads * 4 * 48 * c.head_dim * 2 * 2);  // f16 keys and values, scores on top
  EXPECT_LT(run.kv_bytes_after_eviction, heads * r.sample.context_tokens * c.head_dim * 2 * 2);
}

TEST(SharedContextRuns, MultiTurnReadsTheEarlierQuestionsAndAnswers) {
  const ModelRuns& r = runs();
  const SweepMethod knorm{"knorm", KvBudget::per_head(48), "48"};
  const SampleRun run = r.runner(true, TurnMode::kMultiTurn)(knorm, r.sample);
  ASSERT_EQ(run.turns.size(), 3u);
  std::vector<int32_t> expected;
  for (size_t k = 0; k < 3; ++k) {
    expected.insert(expected.end(), r.sample.turns[k].question.begin(), r.sample.turns[k].question.end());
    EXPECT_EQ(run.turns[k].read, expected) << k;
    expected.insert(expected.end(), run.turns[k].answer.begin(), run.turns[k].answer.end());
  }
  // Turn 3 answers as one prompt of the context and everything it read.
  const SampleRun alone = r.runner(true, TurnMode::kIndependent)(knorm, r.single(run.turns[2].read));
  EXPECT_EQ(run.turns[2].prediction, alone.prediction);
}

TEST(SharedContextRuns, QuestionAwarePressSeesTheFirstQuestionOnly) {
  const ModelRuns& r = runs();
  const SweepMethod snapkv{"snapkv", KvBudget::per_head(48), "48"};
  const SampleRun run = r.runner(false, TurnMode::kIndependent)(snapkv, r.sample);
  ASSERT_EQ(run.turns.size(), 3u);
  // Turn 1 is today's question-aware run; question 1 stays in the context for the others.
  const SampleRun today = r.runner(false, TurnMode::kIndependent)(snapkv, r.single(r.sample.turns[0].question));
  EXPECT_EQ(run.turns[0].prediction, today.prediction);
  EXPECT_TRUE(run.turns[0].read.empty());
  EXPECT_EQ(run.turns[1].read, r.sample.turns[1].question);
}

TEST(SharedContextEval, BadValuesAreRefusedByName) {
  gguf_test::TempDir dir;
  EvalRequest r;
  r.lengths = {512};
  r.output = dir.path().string();
  const auto error_with = [&](const std::function<void(EvalRequest&)>& change) {
    EvalRequest changed = r;
    change(changed);
    return error_of([&] { run_eval(changed, nullptr); });
  };
  EXPECT_NE(error_with([](EvalRequest& e) { e.questions_per_context = 0; }).find("at least 1, got 0"), std::string::npos);
  const std::string task = error_with([](EvalRequest& e) {
    e.questions_per_context = 2;
    e.tasks = {"niah_multikey_1", "cwe"};
  });
  EXPECT_NE(task.find("task cwe cannot ask 2"), std::string::npos) << task;
  // deferkv makes a deferred context instead (DeferKvTurnsAnswerAsTodaysEvalOfEachQuestion).
  for (const char* press : {"snapkv:d=2", "tova"}) {
    const std::string error = error_with([&](EvalRequest& e) {
      e.questions_per_context = 2;
      e.presses = {"full", press};
      e.budgets = {64};
    });
    EXPECT_NE(error.find(std::string("press '") + press + "' evicts after the prefill"), std::string::npos) << error;
  }
  EXPECT_NE(error_with([](EvalRequest& e) {
              e.questions_per_context = 2;
              e.context_mode = "chat";
            }).find("unknown context mode 'chat'"),
            std::string::npos);
  EXPECT_NE(error_with([](EvalRequest& e) { e.context_mode = "multi-turn"; }).find("needs --questions-per-context"),
            std::string::npos);
  EXPECT_NE(error_with([](EvalRequest& e) {
              e.questions_per_context = 2;
              e.bench = "niah";
            }).find("is for --bench ruler"),
            std::string::npos);
}

TEST(SharedContextEval, ReportHasATurnColumnPerQuestionAndTheRowsKnowQAndMode) {
  gguf_test::TempDir dir;
  EvalRequest r;
  r.tasks = {"niah_multikey_2"};
  r.lengths = {512};
  r.samples = 2;
  r.presses = {"full", "knorm"};
  r.budgets = {48};
  r.question_agnostic = true;
  r.questions_per_context = 3;
  r.output = dir.path().string();
  r.name = "q3";
  const EvalOutcome outcome = run_eval(r, nullptr);
  ASSERT_EQ(outcome.failed_rows, 0);
  const std::string md = testing::read_file(outcome.dir + "/summary.md");
  EXPECT_NE(md.find("| method | turn 1 | turn 2 | turn 3 | samples | prefill tokens saved |"), std::string::npos) << md;
  EXPECT_TRUE(std::filesystem::exists(outcome.dir + "/score-by-turn.svg"));
  const auto summary = nlohmann::json::parse(testing::read_file(outcome.dir + "/summary.json"));
  const nlohmann::json& turns = summary["turns"];
  EXPECT_EQ(turns["questions_per_context"], 3);
  EXPECT_EQ(turns["context_mode"], "independent");
  ASSERT_EQ(turns["rows"].size(), 2u);
  // Each turn's score is the mean of the rows' own turn scores (read back from the log).
  std::vector<double> sums(3, 0.0);
  int64_t saved = 0, rows = 0;
  for (const std::string& line : {testing::read_file(outcome.dir + "/samples.jsonl")}) {
    size_t begin = 0;
    for (size_t end = line.find('\n'); end != std::string::npos; begin = end + 1, end = line.find('\n', begin)) {
      const auto record = nlohmann::json::parse(line.substr(begin, end - begin));
      if (record["label"] != "full") continue;
      ++rows;
      saved += record["prefill_tokens_saved"].get<int64_t>();
      for (size_t k = 0; k < 3; ++k) sums[k] += record["turn_scores"][k].get<double>();
    }
  }
  ASSERT_EQ(rows, 2);
  const nlohmann::json& full = turns["rows"][0];
  EXPECT_EQ(full["label"], "full");
  EXPECT_EQ(full["samples"], 2);
  EXPECT_EQ(full["prefill_tokens_saved"], saved);
  EXPECT_GT(saved, 0);
  for (size_t k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(full["turn_scores"][k].get<double>(), 100 * sums[k] / 2) << k;
  // The rows' identity holds Q and the mode: the other mode is another folder's rows.
  EvalRequest multi = r;
  multi.context_mode = "multi-turn";
  const std::string error = error_of([&] { run_eval(multi, nullptr); });
  EXPECT_NE(error.find("context_mode"), std::string::npos) << error;
}

// The turn table from a sweep whose answers are known: full answers turns 1 and 3 and misses
// turn 2 (it answers turn 1's values there); snapkv answers turn 2 only. Hand-computed:
// full 100, 0, 100; snapkv 0, 100, 0.
TEST(SharedContextEval, TurnScoresAreEachTurnsMeanOverTheSamples) {
  gguf_test::TempDir dir;
  const TaskGenerator generator(test::llama_spm(), options_with(3));
  SweepPlan plan;
  plan.tasks = {"niah_multikey_2", "vt"};
  plan.lengths = {1024};
  plan.samples = 2;
  plan.methods = {{"full", std::nullopt, ""}, {"snapkv", KvBudget::per_head(64), "64"}};
  const SampleExecutor answer = [](const SweepMethod& m, const TaskSample& s) {
    SampleRun run;
    for (size_t k = 0; k < s.turns.size(); ++k) {
      const bool right = m.press == "full" ? k != 1 : k == 1;
      std::string text;
      for (const std::string& r : s.turns[right ? k : (k + 1) % s.turns.size()].references) text += r + " ";
      run.turns.push_back({text, 1, "eog", {}, {}});
    }
    run.prediction = run.turns[0].prediction;
    run.prefill_tokens_saved = 2 * s.context_tokens;
    return run;
  };
  nlohmann::ordered_json config = {{"questions_per_context", 3}, {"context_mode", "multi-turn"}};
  config["sweep"] = sweep_config(plan);
  const std::string out = prepare_results_dir(dir.path().string(), "t", "ruler", config);
  ASSERT_EQ(run_sweep(plan, generator, answer, out, nullptr), 8);
  const std::string tables = write_reports(plan, out, {});
  EXPECT_NE(tables.find("| full | 100.00 | 0.00 | 100.00 | 4 |"), std::string::npos) << tables;
  EXPECT_NE(tables.find("| snapkv@64 | 0.00 | 100.00 | 0.00 | 4 |"), std::string::npos) << tables;
  const auto summary = nlohmann::json::parse(testing::read_file(out + "/summary.json"));
  EXPECT_EQ(summary["turns"]["context_mode"], "multi-turn");
  int64_t saved = 0;
  for (const char* task : {"niah_multikey_2", "vt"}) {
    for (int64_t i = 0; i < 2; ++i) saved += 2 * generator.ruler(task, 1024, i).context_tokens;
  }
  EXPECT_EQ(summary["turns"]["rows"][0]["prefill_tokens_saved"], saved);
  // The plot has a mark per method and turn, and each method in its legend.
  const std::string svg = testing::read_file(out + "/score-by-turn.svg");
  EXPECT_EQ(eval_test::count_of(svg, "<circle"), 6u);
  EXPECT_NE(svg.find(">snapkv@64<"), std::string::npos);
}

}  // namespace
}  // namespace deferkv::eval
