// `deferkv generate`: continue a prompt, streaming the text as it is produced.
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/memory_stats.h"
#include "commands.h"
#include "common_options.h"
#include "escapes.h"
#include "deferkv/chat_template.h"
#include "deferkv/compressed_context.h"
#include "deferkv/error.h"
#include "deferkv/generate.h"
#include "deferkv/tokenizer.h"
#include "eval/tasks/prompt_builder.h"
#include "engine/kept_set_recorder.h"
#include "run_stats.h"

namespace deferkv::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  std::string question;  // read after the prompt (the context)
  std::string question_file;
  bool question_agnostic = false;
  int64_t n_predict = 128;
  int threads = 1;
  int64_t n_ctx = 0;
  int64_t n_batch = 512;
  bool no_bos = false;
  bool parse_special = false;
  bool special = false;
  bool no_escape = false;
  std::string dump_logits;
  bool chat = false;
  std::string chat_template;
  std::string system;
  SamplerParams sampling;
  PressOptions press;
  CacheTypeOptions cache_types;
  std::string draft_model;
  std::string stats_json;
  std::string dump_kept;
  std::string save_context;  // compress the prompt as a context and save it there
  std::string context;       // start from this saved context; the prompt is the question
};

// The prompt's ids: the context's, then the question's (empty without --question).
struct PromptTokens {
  std::vector<int32_t> context, question;
};

// The prompt as the model reads it: raw text, or (with --chat) a user turn, after an
// optional system turn, in the model's chat format with the assistant's turn opened. The
// question follows the context as it is given (a separator such as "\n" is the question's);
// the whole text is encoded once and split where the context's own ids end, so both modes
// read the same ids. With --chat the split is inside the user's turn: the turn's end and the
// assistant's opening go with the question.
PromptTokens prompt_tokens(const GenerateArgs& args, const std::string& context, const std::string& question,
                           const Tokenizer& tokenizer) {
  std::string text = context + question;
  size_t context_end = context.size();
  bool parse_special = args.parse_special;
  if (args.chat) {
    const ChatTemplate chat = ChatTemplate::detect(tokenizer, args.chat_template);
    std::vector<ChatMessage> messages;
    if (!args.system.empty()) messages.push_back({"system", args.no_escape ? args.system : process_escapes(args.system)});
    messages.push_back({"user", text});
    text = chat.apply(messages, true);
    context_end = eval::context_end_in_chat(text, messages.back().content, context_end);
    parse_special = true;
  }
  std::vector<int32_t> ids = tokenizer.encode(text, !args.no_bos, parse_special);
  if (question.empty()) return {std::move(ids), {}};
  const auto split = eval::shared_prefix_length(ids, tokenizer.encode(text.substr(0, context_end), !args.no_bos, parse_special));
  return {std::vector<int32_t>(ids.begin(), ids.begin() + split), std::vector<int32_t>(ids.begin() + split, ids.end())};
}

// -p takes llama.cpp's escapes (\n, \t, \xHH ...) unless --no-escape; a file is read as it is.
std::string text_of(const GenerateArgs& args, const std::string& inline_text, const std::string& file) {
  if (!file.empty()) return read_text_file(file);
  return args.no_escape ? inline_text : process_escapes(inline_text);
}

void write_logits(const std::string& path, const float* logits, int64_t n) {
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("cannot write logits to '{}'", path);
  // float32 little-endian: the in-memory layout on the little-endian hosts deferkv runs on.
  out.write(reinterpret_cast<const char*>(logits), static_cast<std::streamsize>(n * sizeof(float)));
  if (!out) fail("cannot write logits to '{}'", path);
}

// "64 per head", or a ratio with what it resolves to: "ratio 0.9 = 24 per head".
std::string budget_text(const KvBudget& budget, int64_t prompt_tokens) {
  if (!budget.is_ratio()) return budget.describe();
  return fmt::format("{} = {} per head", budget.describe(), budget.resolve(prompt_tokens));
}

void run_generate(const GenerateArgs& args) {
  if (args.prompt.empty() == args.prompt_file.empty()) fail("give the prompt with -p or -f (one of them)");
  if (!args.question.empty() && !args.question_file.empty()) fail("give the question with --question or --question-file, not both");
  const bool has_question = !args.question.empty() || !args.question_file.empty();
  if (args.question_agnostic && !has_question) {
    fail("--question-agnostic compresses the prompt (-p/-f) as the context before the question is read: give the "
         "question with --question TEXT or --question-file FILE");
  }
  if (!args.context.empty()) {
    if (!args.save_context.empty()) fail("give --context (answer after a saved context) or --save-context, not both");
    if (has_question) fail("with --context the prompt (-p/-f) is the question: give no --question");
    if (args.chat) fail("--context reads the prompt as it is after the saved context: --chat cannot wrap it");
    if (!args.draft_model.empty() || !args.dump_kept.empty()) {
      fail("--context answers without a press (the saved context's has done its work): --draft-model and --dump-kept "
           "have nothing to do");
    }
  }
  const std::string question = has_question ? text_of(args, args.question, args.question_file) : "";
  if (has_question && question.empty()) fail("the question is empty: --question-file '{}' has no text", args.question_file);
  auto model = Model::load(args.model);
  const Tokenizer& tokenizer = model->tokenizer();
  // With --context the prompt is the question: read after the context, so without BOS.
  const PromptTokens prompt =
      args.context.empty() ? prompt_tokens(args, text_of(args, args.prompt, args.prompt_file), question, tokenizer)
                           : PromptTokens{{}, tokenizer.encode(text_of(args, args.prompt, args.prompt_file), false,
                                                               args.parse_special)};
  if (!args.context.empty() && prompt.question.empty()) fail("the prompt encodes to no tokens: it is the question after --context");
  if (has_question && prompt.question.empty()) fail("the question encodes to no tokens of its own");
  // The prompt the press compresses: the context alone in question-agnostic mode.
  const auto pressed_tokens = static_cast<int64_t>(prompt.context.size() + (args.question_agnostic ? 0 : prompt.question.size()));
  const auto prompt_size = static_cast<int64_t>(prompt.context.size() + prompt.question.size());

  SessionOptions options;
  options.n_ctx = args.n_ctx;
  options.n_batch = args.n_batch;
  args.cache_types.apply(options);
  auto owned = std::make_unique<Session>(model, make_thread_pool(args.threads), options);
  std::shared_ptr<const CompressedContext> context;
  if (!args.context.empty()) {
    context = CompressedContext::load(args.context, *model);
    // A --press given must be the one the context was made with; left out, the context's holds.
    const std::unique_ptr<Press> press = make_press_from(args.press);
    try {
      context->check_made_with(press ? press->describe() : context->press(), options.cache_type_k, options.cache_type_v);
      // A deferred context's budget is still to be chosen at step d: a budget given must be its.
      if (press && context->deferred()) context->check_deferred_budget(budget_from(args.press));
    } catch (const Error& e) {
      fail("cannot answer after '{}': {}", args.context, e.what());
    }
  } else {
    owned->set_press(make_press_from(args.press));
    if (!args.draft_model.empty()) owned->set_draft_model(Model::load(args.draft_model));
  }
  if (!args.save_context.empty()) {
    // The prompt is the context, compressed alone (question-agnostic); a question, if given,
    // is then answered from the saved context as --context would.
    warn_if_budget_covers_prompt(budget_from(args.press), static_cast<int64_t>(prompt.context.size()));
    context = CompressedContext::compress(*owned, prompt.context);
    context->save(args.save_context);
    fmt::print(stderr, "context: {} tokens compressed by {} ({}/{}, {}), {} entries kept, {:.2f} MiB, saved to '{}'\n",
               context->tokens().size(), context->press(), context->cache_type_k(), context->cache_type_v(),
               context_mode_name(context->mode()), context->kept_entries(), context->bytes() / 1048576.0,
               args.save_context);
    if (!has_question) return;
    owned = std::make_unique<Session>(model, make_thread_pool(args.threads), options);
  }
  Session& session = *owned;
  if (session.press() != nullptr) {
    warn_if_budget_covers_prompt(budget_from(args.press), pressed_tokens);
  }
  Sampler sampler(args.sampling);

  GenerateOptions gen;
  gen.n_predict = args.n_predict;
  gen.question_agnostic = args.question_agnostic;
  if (!args.dump_logits.empty()) {
    gen.after_prefill = [&](const Session& s) {
      write_logits(args.dump_logits, s.last_logits(), model->config().n_vocab);
    };
  }
  KeptSetRecorder kept;
  kept.attach(gen);
  // The output continues the prompt: its first piece keeps its leading space.
  StreamingDecoder decoder(tokenizer, DecodeStart::kContinuation);
  const auto on_token = [&](int32_t token) {
    kept.update(session);
    // Control tokens (<s>, <|im_start|>) print only with --special, as in llama.cpp.
    if (!args.special && tokenizer.token_kind(token) == TokenKind::kControl) return true;
    const std::string piece = decoder.push(token);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  GenerateResult result = context ? generate(session, *context, prompt.question, gen, sampler, on_token)
                                  : generate(session, prompt.context, prompt.question, gen, sampler, on_token);
  kept.update(session);
  const std::string rest = decoder.finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);

  const SessionTimings& t = session.timings();
  fmt::print(stderr, "\nprompt: {} tokens in {:.3f} s ({:.1f} tok/s); generated: {} tokens in {:.3f} s "
             "({:.1f} tok/s); stop: {}; seed: {}\n",
             t.prefill_tokens, t.prefill_seconds, t.prefill_tokens / std::max(t.prefill_seconds, 1e-9),
             t.decode_tokens, t.decode_seconds, t.decode_tokens / std::max(t.decode_seconds, 1e-9),
             stop_reason_name(result.stop), sampler.seed());
  const KvStats kv = session.kv_stats();
  fmt::print(stderr, "kv: {} ({}{}), {}: {:.2f} MiB held, peak {:.2f} MiB; peak RSS {:.1f} MiB; capture {:.1f} ms, "
             "eviction {:.1f} ms\n",
             context                    ? fmt::format("{}, a compressed context of {} tokens", context->press(),
                                                          context->tokens().size())
             : session.press() != nullptr ? session.press()->describe()
                                          : "full",
             budget_text(budget_from(args.press), pressed_tokens),
             has_question ? fmt::format("; {}, {} context + {} question tokens",
                                        question_mode_name(args.question_agnostic || context != nullptr),
                                        prompt.context.size(), prompt.question.size())
                          : "",
             args.cache_types.describe(),
             kv.bytes / 1048576.0, kv.peak_bytes / 1048576.0, peak_rss_bytes() / 1048576.0, t.capture_seconds * 1e3,
             t.eviction_seconds * 1e3);
  if (session.press() != nullptr) fmt::print(stderr, "{}\n", kept_summary_line(kept.kept()));
  if (!args.dump_kept.empty()) write_kept_dump(args.dump_kept, kept);
  if (!args.stats_json.empty()) {
    nlohmann::json stats = session_stats(session, prompt_size, static_cast<int64_t>(result.tokens.size()));
    const KvBudget budget = budget_from(args.press);
    // The budget as given and the entries per head it resolves to for this prompt.
    stats["budget"] = !budget.is_set() ? nlohmann::json(nullptr)
                                       : nlohmann::json{{"given", budget.describe()}, {"per_head", budget.resolve(prompt_size)}};
    stats["kept"] = kept_stats_json(kept);
    write_json_file(args.stats_json, stats);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Continue a prompt, streaming the text");
  add_model_option(*cmd, args->model);
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text (escapes such as \\n are processed)");
  cmd->add_flag("--no-escape", args->no_escape, "Take -p and --system as they are, without processing \\n, \\t, \\xHH ...");
  cmd->add_option("-f,--file", args->prompt_file, "Read the prompt from a file");
  cmd->add_option("--question", args->question,
                  "A question read after the prompt, which is then its context (escapes as for -p; a separator "
                  "such as \\n is the question's)");
  cmd->add_option("--question-file", args->question_file, "Read the question from a file");
  add_question_agnostic_option(*cmd, args->question_agnostic, "the prompt -p/-f is the context, --question the question");
  cmd->add_option("--save-context", args->save_context,
                  "Compress the prompt (-p/-f) alone as a context with --press and save it to this file "
                  "(docs/compressed_context.md); with --question, then answer it from the saved context");
  cmd->add_option("--context", args->context,
                  "Start from a context saved with --save-context (same model and cache types; --press, if given, "
                  "must be the context's): the prompt (-p/-f) is the question, read after it without BOS");
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens to generate; -1 = until end of text")
      ->capture_default_str();
  add_threads_option(*cmd, args->threads);
  cmd->add_option("-c,--ctx-size", args->n_ctx, "Context size in tokens (default: model's, at most 4096)");
  cmd->add_option("-b,--batch-size", args->n_batch, "Prompt tokens per forward pass")->capture_default_str();
  cmd->add_flag("--no-bos", args->no_bos, "Do not add the beginning-of-sequence token");
  cmd->add_flag("--parse-special", args->parse_special, "Parse special-token text such as <|eot_id|>");
  cmd->add_flag("--special", args->special, "Print control tokens the model generates (<s>, <|im_start|>)");
  cmd->add_option("--dump-logits", args->dump_logits,
                  "Write the logits of the prompt's last position (raw float32 LE) to this file");
  cmd->add_flag("--chat", args->chat, "Wrap the prompt as a user turn in the model's chat format");
  cmd->add_option("--chat-template", args->chat_template,
                  "Chat format to use instead of the model's: " + fmt::format("{}", fmt::join(ChatTemplate::known_names(), ", ")));
  cmd->add_option("--system", args->system, "System message for --chat");
  add_sampling_options(*cmd, args->sampling);
  add_press_options(*cmd, args->press);
  add_cache_type_options(*cmd, args->cache_types);
  add_draft_model_option(*cmd, args->draft_model);
  cmd->add_option("--stats-json", args->stats_json,
                  "Write KV entries and bytes per layer after eviction, peak KV bytes, kept/total per layer and KV "
                  "head, the resolved budget and timings to this JSON file");
  cmd->add_option("--dump-kept", args->dump_kept,
                  "Write the original positions each layer and KV head kept after eviction to this file (JSON lines)");
  cmd->callback([args] {
    if (!args->chat && (!args->chat_template.empty() || !args->system.empty())) {
      fail("--chat-template and --system need --chat");
    }
    run_generate(*args);
  });
}

}  // namespace deferkv::cli
