#include "engine/session_press_host.h"

#include <algorithm>
#include <optional>

#include "deferkv/chat_template.h"
#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "engine/scoped_timer.h"
#include "engine/session_phase.h"
#include "kv/kv_cache.h"
#include "model/forward_pass.h"
#include "model/weights_readout.h"
#include "observe/attention_tap.h"
#include "observe/lookahead_rows.h"

namespace deferkv {

void Session::Host::reserve_after_prompt(int64_t n_positions) {
  PressNeeds& needs = attaching("reserve_after_prompt");
  needs.reserved_after_prompt = std::max(needs.reserved_after_prompt, n_positions);
}

void Session::Host::reserve_prompt_length_after_prompt(int64_t at_most) {
  PressNeeds& needs = attaching("reserve_prompt_length_after_prompt");
  needs.prompt_length_after_prompt = std::max(needs.prompt_length_after_prompt, at_most);
}

std::vector<int32_t> Session::Host::encode_text(const std::string& text) {
  return s_.model_->tokenizer().encode(text, false, false);
}

const std::string& Session::Host::model_path() { return s_.model_->path(); }

std::vector<PromptFrame> Session::Host::prompt_frames() {
  const Tokenizer& tokenizer = s_.model_->tokenizer();
  std::vector<PromptFrame> frames;
  if (!tokenizer.chat_template().empty()) {
    std::optional<ChatTemplate> chat;
    try {
      chat = ChatTemplate::detect(tokenizer);
    } catch (const Error&) {
      // A template deferkv does not know: only the plain frame is offered.
    }
    if (chat) {
      // One user turn around a marker, split where the marker is.
      const std::string marker = "\x01" "deferkv-text" "\x01";  // apart: \x01de... would read as one hex escape
      const std::string turn = chat->apply({{"user", marker}}, true);
      const size_t at = turn.find(marker);
      if (at != std::string::npos) {
        frames.push_back({PromptFrame::Form::kChat, tokenizer.encode(turn.substr(0, at), true, true),
                          tokenizer.encode(turn.substr(at + marker.size()), false, true)});
      }
    }
  }
  frames.push_back({PromptFrame::Form::kPlain, tokenizer.encode("", true, false), {}});
  return frames;
}

const std::vector<int32_t>& Session::Host::prompt_tokens() { return at_prefill_end("the prompt's tokens"); }

void Session::Host::use_draft_model() { attaching("use_draft_model").drafts = true; }

const ModelReadout& Session::Host::read_model_output(ResidualObserver observe) {
  PressNeeds& needs = attaching("read_model_output");
  if (!needs.readout) {
    needs.readout = std::make_unique<WeightsReadout>(s_.model_->config(), s_.model_->weights(), *s_.pool_);
  }
  // An empty observer: the press reads the weights only (CriticalKV's W_O), and the forward
  // pass need not hand out its residual stream for it.
  if (observe) needs.residual_observers.push_back(std::move(observe));
  return *needs.readout;
}

void Session::Host::continue_at(int64_t position) {
  at_prefill_end("continue_at");
  const KvCache& cache = *s_.cache_;
  for (int64_t l = 0; l < cache.n_layer(); ++l) {
    for (int64_t g = 0; g < cache.n_head_kv(); ++g) {
      const int64_t n = cache.length(l, g);
      if (position < 0 || position > s_.n_past_ || (n > 0 && cache.positions(l, g)[n - 1] >= position)) {
        fail("press '{}' continues at position {}, but layer {} KV head {} holds an entry there or later",
             press_name(), position, l, g);
      }
    }
  }
  s_.n_past_ = position;
}

void Session::Host::greedy_lookahead(int64_t n_tokens, const std::function<void(KvCache&)>& prepare,
                                     const AttentionObserver& observe) {
  at_prefill_end("a greedy lookahead");
  const auto saved = s_.checkpoint();
  prepare(*s_.cache_);
  const int64_t n_vocab = s_.model_->config().n_vocab;
  std::vector<float> logits(s_.last_logits(), s_.last_logits() + n_vocab);
  run_observed(&observe, [&] {
    for (int64_t i = 0; i < n_tokens && s_.n_past_ < s_.n_ctx_; ++i) {
      const auto token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (s_.model_->tokenizer().is_end_of_generation(token)) break;
      const auto position = static_cast<int32_t>(s_.n_past_);
      s_.forward_->run(&token, &position, 1, *s_.cache_, false, logits.data(), PassPhase::kCapability);
      ++s_.n_past_;
    }
  });
  s_.rollback(*saved);
}

std::vector<int32_t> Session::Host::draft(int64_t n_tokens) {
  const std::vector<int32_t>& prompt = at_prefill_end("a draft");
  if (!s_.needs_.drafts || !s_.draft_model_) {
    fail("internal: press '{}' drafts without use_draft_model()", press_name());
  }
  std::vector<int32_t> out;
  run_observed(nullptr, [&] {
    // The draft model continues the prompt greedily, as far as the context goes.
    SessionOptions draft_options;
    draft_options.cache_type_k = s_.options_.cache_type_k;
    draft_options.cache_type_v = s_.options_.cache_type_v;
    draft_options.n_ctx = std::min(s_.n_ctx_, static_cast<int64_t>(prompt.size()) + n_tokens + 1);
    Session drafter(s_.draft_model_, s_.pool_, draft_options);
    drafter.prefill(prompt);
    const int64_t n_vocab = s_.model_->config().n_vocab;
    const int64_t room = s_.n_ctx_ - static_cast<int64_t>(prompt.size());
    for (int64_t i = 0; i < n_tokens && static_cast<int64_t>(out.size()) < room; ++i) {
      const float* logits = drafter.last_logits();
      const auto token = static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
      if (s_.model_->tokenizer().is_end_of_generation(token)) break;
      out.push_back(token);
      if (i + 1 < n_tokens && drafter.n_past() < drafter.n_ctx()) drafter.decode(token);
    }
  });
  return out;
}

void Session::Host::run_after_prompt(const std::vector<int32_t>& tokens, const AttentionObserver& observe) {
  const int64_t n = std::min(static_cast<int64_t>(tokens.size()), s_.n_ctx_ - s_.n_past_);
  run_n_after_prompt(n, observe, [&](int64_t begin, const int32_t* positions, int64_t count) {
    s_.forward_->run(tokens.data() + begin, positions, count, *s_.cache_, false, nullptr, PassPhase::kCapability);
  });
}

void Session::Host::run_after_prompt(const LookaheadRows& rows, const AttentionObserver& observe) {
  if (s_.n_past_ + rows.n_rows() > s_.n_ctx_) {
    fail("internal: press '{}' runs {} rows after the prompt without reserve_after_prompt()", press_name(),
         rows.n_rows());
  }
  run_n_after_prompt(rows.n_rows(), observe, [&](int64_t begin, const int32_t* positions, int64_t count) {
    s_.forward_->run_rows(rows, begin, positions, count, *s_.cache_, PassPhase::kCapability);
  });
}

void Session::Host::refeed_last_token() {
  const int32_t last = at_prefill_end("feeding the prompt's last token again").back();
  if (s_.options_.all_logits) {
    fail("press '{}' feeds the prompt's last token again: turn all_logits off", press_name());
  }
  run_observed(nullptr, [&] {
    s_.cache_->truncate(static_cast<int32_t>(s_.n_past_ - 1));
    --s_.n_past_;
    s_.feed({last}, PassPhase::kCapability);
  });
}

std::string Session::Host::press_name() const { return s_.press_ ? s_.press_->describe() : std::string("(none)"); }

Session::PressNeeds& Session::Host::attaching(const char* what) const {
  const auto* attaching = std::get_if<Attaching>(&s_.phase_);
  if (attaching == nullptr) {
    fail("internal: press '{}' called {} outside on_attach, while the session is {}", press_name(), what,
         session_phase_name(s_.phase()));
  }
  return *attaching->needs;
}

const std::vector<int32_t>& Session::Host::at_prefill_end(const char* what) const {
  const auto* prompt_end = std::get_if<PromptEnd>(&s_.phase_);
  if (prompt_end == nullptr) {
    fail("internal: press '{}' asked for {} outside the prompt's end (kPromptEnd), while the session is {}", press_name(), what,
         session_phase_name(s_.phase()));
  }
  return *prompt_end->tokens;
}

void Session::Host::run_observed(const AttentionObserver* observe, const std::function<void()>& run) {
  const PromptEnd prompt_end = std::get<PromptEnd>(s_.phase_);  // at_prefill_end checked it
  struct Scope {
    Phase& phase;
    PromptEnd prompt_end;
    ~Scope() { phase = prompt_end; }
  } scope{s_.phase_, prompt_end};
  s_.phase_ = Capability{.observer = observe};
  ScopedTimer lookahead(s_.timings_.lookahead_seconds);
  run();
}

void Session::Host::run_n_after_prompt(int64_t n, const AttentionObserver& observe,
                                       const std::function<void(int64_t, const int32_t*, int64_t)>& run_batch) {
  at_prefill_end("input after the prompt");
  run_observed(&observe, [&] {
    const int64_t batch = s_.forward_->max_batch();
    for (int64_t begin = 0; begin < n; begin += batch) {
      const int64_t count = std::min(batch, n - begin);
      s_.positions_.resize(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        s_.positions_[static_cast<size_t>(i)] = static_cast<int32_t>(s_.n_past_ + begin + i);
      }
      run_batch(begin, s_.positions_.data(), count);
    }
    // n_past_ and the logits never moved; only the extra entries are to go.
    s_.cache_->truncate(static_cast<int32_t>(s_.n_past_));
  });
}

}  // namespace deferkv
