#include "eval_server_run.h"

#include <cstdlib>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "eval/sweep/slots.h"
#include "eval_lists.h"
#include "eval/run/sample_runner.h"

namespace deferkv::cli {
namespace {

using nlohmann::json;

std::string api_key_from_environment() {
  for (const char* name : kApiKeyVariables) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return value;
  }
  return "";
}

// A number of the answer's usage (or llama.cpp's timings) object, 0 when absent.
double number_in(const json& answer, const char* object, const char* field) {
  if (!answer.contains(object) || !answer[object].is_object()) return 0;
  const json& o = answer[object];
  return o.contains(field) && o[field].is_number() ? o[field].get<double>() : 0;
}

}  // namespace

void add_eval_server_options(CLI::App& cmd, EvalServerArgs& args) {
  cmd.add_option("--server", args.urls,
                 fmt::format("Send the prompts to OpenAI-compatible servers instead (URL[,URL…], e.g. "
                             "http://127.0.0.1:8080; requests spread over them); API key from ${} or ${}",
                             kApiKeyVariables[0], kApiKeyVariables[1]));
  cmd.add_option("--concurrency", args.concurrency, "With --server: requests in flight at once")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd.add_option("--api", args.api,
                 "With --server: completions (the prompt's token ids, as sized here) or chat (the prompt as a user "
                 "message, in the server's chat format)")
      ->capture_default_str()->check(CLI::IsMember({"completions", "chat"}));
  cmd.add_option("--timeout", args.timeout_seconds, "With --server: seconds to wait for one answer")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd.add_option("--retries", args.retries,
                 "With --server: tries more after no connection, a timeout, HTTP 429 or 5xx (1 s, 2 s, 4 s … apart)")
      ->capture_default_str()->check(CLI::Range(0, 100));
}

EvalServerRunner::EvalServerRunner(const EvalServerArgs& args, const eval::SweepPlan& plan, const Tokenizer& tokenizer,
                                   SamplerParams sampling)
    : urls_(split_names(args.urls)), concurrency_(args.concurrency), benchmark_(plan.benchmark), chat_(args.api == "chat"), drop_leading_space_(tokenizer.adds_space_prefix()),
      sampling_(sampling) {
  client::ClientOptions options;
  options.api_key = api_key_from_environment();
  options.timeout_seconds = args.timeout_seconds;
  options.retries = args.retries;
  for (const std::string& url : urls_) {
    options.url = url;
    clients_.emplace_back(options);
  }
  if (clients_.empty()) fail("--server: give the URL of a server");
  for (size_t i = 0; i < clients_.size(); ++i) {
    const client::ServedModel served = clients_[i].served_model();
    deferkv_servers_.push_back(served.owned_by == "deferkv");
    if (i == 0) {
      model_ = served;
    } else if (served.id != model_.id) {
      fail("--server: {} serves '{}' but {} serves '{}': replicas of one model only", clients_[i].url(), served.id,
           clients_[0].url(), model_.id);
    }
    if (served.owned_by == "deferkv") continue;
    for (const eval::SweepMethod& method : plan.methods) {
      if (method.budget) {
        fail("--server: {} is not deferkv serve (its model is owned by '{}'), so it cannot run --press {}; other "
             "servers run --press full only",
             clients_[i].url(), served.owned_by, method.press);
      }
    }
  }
}

nlohmann::ordered_json EvalServerRunner::run_fields() const {
  return {{"server", urls_}, {"concurrency", concurrency_}};
}

void EvalServerRunner::describe_in(nlohmann::ordered_json& config) const {
  for (const char* local_only : {"threads", "n_batch", "kv_cache"}) config.erase(local_only);
  // The model the servers run, besides -m (whose tokenizer sized the prompts); not their
  // URLs, so that replicas, or the same server moved, share rows.
  config["server"] = {{"api", chat_ ? "chat" : "completions"}, {"model", model_.id}, {"owned_by", model_.owned_by}};
}

json EvalServerRunner::request_of(const eval::SweepMethod& method, const eval::TaskSample& sample,
                                  bool deferkv_server) const {
  json body;
  body["model"] = model_.id;
  if (chat_) {
    body["messages"] = json::array({{{"role", "user"}, {"content", sample.prompt}}});
  } else {
    body["prompt"] = sample.tokens;
  }
  body["max_tokens"] = sample.max_new_tokens;
  body["temperature"] = sampling_.temperature;
  if (sampling_.temperature > 0) {
    body["top_k"] = sampling_.top_k;
    body["top_p"] = sampling_.top_p;
    body["min_p"] = sampling_.min_p;
  }
  if (sampling_.temperature > 0) {
    // The sample's seed (a local run's) without its top bit: deferkv serve and OpenAI take
    // seeds up to 2^63 - 1. So a sampled sweep draws alike on every server run.
    body["seed"] = eval::sample_seed_of(sampling_.seed, sample) >> 1;
  }
  if (sample.stop_at_newline) body["stop"] = json::array({"\n"});
  // deferkv serve is told the press of every row, the full cache's too: without it, its own
  // --press default would run under the row's label. Other servers run full rows only and
  // may refuse fields they do not know (OpenAI does).
  if (deferkv_server) body["kv_press"] = method.press;
  if (method.budget) {
    if (method.budget->is_ratio()) {
      body["kv_ratio"] = method.budget->compression_ratio();
    } else {
      body["kv_budget"] = method.budget->entries_per_head();
    }
  }
  return body;
}

eval::SampleRun EvalServerRunner::operator()(const eval::SweepMethod& method, const eval::TaskSample& sample) const {
  const size_t which = next_client_++ % clients_.size();
  const client::OpenAiClient& server = clients_[which];
  const json request = request_of(method, sample, deferkv_servers_[which]);
  json answer;
  try {
    answer = server.complete(request, chat_);
    // The row is labelled with its press: deferkv serve must say it ran that one.
    if (deferkv_servers_[which]) {
      if (const std::string m = client::press_mismatch(request, answer["usage"]); !m.empty()) {
        fail("{}: {}", server.url(), m);
      }
    }
  } catch (const Error& e) {
    eval::SweepPlan plan;
    plan.benchmark = benchmark_;
    const eval::SampleSlot slot{sample.task, sample.target_length, sample.index, sample.depth_percent};
    fail("eval --server: {} (sample {}); the rows done are kept, and a rerun resumes after them", e.what(),
         eval::row_text(plan, method, slot));
  }
  const json& choice = answer["choices"][0];
  eval::SampleRun run;
  run.prediction = chat_ ? choice["message"]["content"].get<std::string>() : choice["text"].get<std::string>();
  // A server's text continues the prompt; a local run decodes the answer as a new text (as
  // Hugging Face's decode, which the reference scripts score, does), without the space a
  // SentencePiece vocabulary writes before its first word.
  if (drop_leading_space_ && run.prediction.starts_with(' ')) run.prediction.erase(0, 1);
  // A server that ignores "stop" still answers with the line a local run keeps.
  if (sample.stop_at_newline) run.prediction = run.prediction.substr(0, run.prediction.find('\n'));
  run.stop = choice.contains("finish_reason") && choice["finish_reason"].is_string()
                 ? choice["finish_reason"].get<std::string>()
                 : "";
  run.generated_tokens = static_cast<int64_t>(number_in(answer, "usage", "completion_tokens"));
  // deferkv serve's usage, or llama.cpp's timings; other servers report no cost.
  run.prefill_seconds = (number_in(answer, "usage", "prefill_ms") + number_in(answer, "timings", "prompt_ms")) / 1e3;
  run.decode_seconds = (number_in(answer, "usage", "decode_ms") + number_in(answer, "timings", "predicted_ms")) / 1e3;
  run.decode_tokens = run.decode_seconds > 0 ? run.generated_tokens : 0;
  run.capture_seconds = number_in(answer, "usage", "capture_ms") / 1e3;
  run.eviction_seconds = number_in(answer, "usage", "eviction_ms") / 1e3;
  if (method.budget && answer.contains("usage") && answer["usage"].is_object() && answer["usage"].contains("kv_bytes")) {
    run.kv_bytes_after_eviction = static_cast<int64_t>(number_in(answer, "usage", "kv_bytes"));
  }
  run.peak_kv_bytes = static_cast<int64_t>(number_in(answer, "usage", "kv_peak_bytes"));
  return run;
}

}  // namespace deferkv::cli
