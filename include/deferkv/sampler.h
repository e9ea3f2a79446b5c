#pragma once
// Turns logits into the next token: repetition penalty, then top-k, top-p and min-p
// filtering on the probabilities at temperature 1, then temperature and a seeded draw
// (the order of llama.cpp's default chain). temperature <= 0 means greedy (argmax).
#include <cstdint>
#include <deque>
#include <random>
#include <utility>
#include <vector>

namespace deferkv {

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;          // <= 0: off
  float top_p = 0.95f;         // >= 1: off
  float min_p = 0.05f;         // <= 0: off
  float repeat_penalty = 1.0f; // 1: off
  int32_t repeat_last_n = 64;
  uint64_t seed = 0xFFFFFFFF;  // this value: a random seed

  // Checks ranges; throws an Error naming the parameter.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);

  int32_t sample(const float* logits, int64_t n_vocab);
  // Records a token as generated (or part of the prompt) for the repetition penalty.
  void accept(int32_t token);

  uint64_t seed() const { return seed_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  void apply_penalty(std::vector<Candidate>& c) const;
  // Sets c[i].p to the softmax of logit / temperature over the first n candidates.
  static void softmax(std::vector<Candidate>& c, size_t n, float temperature);

  SamplerParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::deque<int32_t> recent_;
  std::vector<Candidate> candidates_;
};

// A chosen token's log-probability under the model (the log-softmax of the raw logits:
// before the repetition penalty, temperature and filtering, so it does not depend on how
// the token was sampled; what evaluation harnesses read), and the `top` likeliest tokens
// of the same step, likeliest first (ties: the lower id).
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
TokenLogprobs token_logprobs(const float* logits, int64_t n_vocab, int32_t token, int32_t top);

}  // namespace deferkv
