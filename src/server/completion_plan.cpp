#include "server/completion_plan.h"

#include <algorithm>

#include "deferkv/error.h"
#include "deferkv/press.h"
#include "server/api_error.h"

namespace deferkv::server {
namespace {

// after_context: the prompts follow a compressed context (no BOS; a chat's messages alone).
std::vector<std::vector<int32_t>> tokenize_prompts(const CompletionRequest& r, const Tokenizer& tok,
                                                   const ChatTemplate& chat_template, bool after_context) {
  std::vector<std::vector<int32_t>> prompts;
  if (r.chat) prompts.push_back(tok.encode(chat_template.apply(r.messages, true), !after_context, true));
  for (const PromptInput& p : r.prompts) {
    for (int32_t id : p.tokens) {
      if (id >= tok.n_vocab()) bad_request("prompt", fmt::format("token {} is not in the vocabulary [0, {})", id, tok.n_vocab()));
    }
    prompts.push_back(p.tokens.empty() ? tok.encode(p.text, !after_context, false) : p.tokens);
  }
  return prompts;
}

GenerationRequest generation(const CompletionRequest& r, std::vector<int32_t> prompt, int64_t n_ctx,
                             const std::shared_ptr<const CompressedContext>& context) {
  GenerationRequest g;
  // No max_tokens: up to the context's end (-1), as OpenAI and llama-server; one beyond the
  // room left after the prompt is cut to it, as llama-server stops at the context's end
  // (finish_reason "length" either way).
  const int64_t before = context ? context->n_past() : 0;
  const auto room = n_ctx - before - static_cast<int64_t>(prompt.size());
  g.context = context;
  g.context_id = r.kv_context;
  g.max_tokens = r.max_tokens ? std::min(*r.max_tokens, room) : -1;
  g.prompt = std::move(prompt);
  g.stop_at_end_of_generation = !r.ignore_eos;
  g.sampling = r.sampling;
  g.logprobs = r.logprobs;
  set_press(r, g);
  return g;
}

}  // namespace

void set_press(const CompletionRequest& r, GenerationRequest& g) {
  if (r.press == "full") return;
  g.budget = r.kv_ratio >= 0 ? KvBudget::ratio(r.kv_ratio)
             : r.kv_budget > 0 ? KvBudget::per_head(r.kv_budget)
                               : KvBudget();
  try {
    g.press = make_press(r.press, g.budget);
  } catch (const Error& e) {
    bad_request("kv_press", e.what());
  }
}

CompletionPlan plan_completion(const CompletionRequest& r, const Tokenizer& tok, const ChatTemplate& chat_template,
                               int64_t n_ctx, const std::shared_ptr<const CompressedContext>& context) {
  std::vector<std::vector<int32_t>> prompts = tokenize_prompts(r, tok, chat_template, context != nullptr);
  const int64_t before = context ? context->n_past() : 0;
  for (const auto& prompt : prompts) {
    const auto n_prompt = static_cast<int64_t>(prompt.size());
    if (before + n_prompt >= n_ctx) {
      bad_request(r.chat ? "messages" : "prompt",
                  context ? fmt::format("the prompt is {} tokens after the context's {} positions; the context holds {}",
                                        n_prompt, before, n_ctx)
                          : fmt::format("the prompt is {} tokens; the context holds {}", n_prompt, n_ctx),
                  "context_length_exceeded");
    }
  }
  CompletionPlan plan;
  for (auto& prompt : prompts) plan.generations.push_back(generation(r, std::move(prompt), n_ctx, context));
  return plan;
}

std::vector<int32_t> context_tokens(const CompletionRequest& r, const Tokenizer& tok, const ChatTemplate& chat_template,
                                    int64_t n_ctx) {
  const char* field = r.chat ? "messages" : "prompt";
  if (r.prompts.size() > 1) bad_request("prompt", "a context is made from one prompt, not a list of prompts");
  std::vector<int32_t> tokens;
  if (r.chat) {
    tokens = tok.encode(chat_template.apply(r.messages, false), true, true);
  } else {
    tokens = tokenize_prompts(r, tok, chat_template, false).at(0);
  }
  const auto n = static_cast<int64_t>(tokens.size());
  if (n >= n_ctx) {
    bad_request(field, fmt::format("the context is {} tokens; the server's context holds {} and a question must follow",
                                   n, n_ctx), "context_length_exceeded");
  }
  return tokens;
}

}  // namespace deferkv::server
