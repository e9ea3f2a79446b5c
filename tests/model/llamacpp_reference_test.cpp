// Qwen2 and Qwen3 against an engine that shares none of this project's code: llama.cpp's
// logits (September 2026 source, f32 KV cache, one batch) of tiny random models committed
// in tests/data/models, made and dumped as scripts/reference/README.md shows. The project's
// own f64 reference reads its rope style and eps from the project's config parser; this test
// does not depend on that parser being right. (Mutant checked: the config parser giving Qwen
// the interleaved RoPE of llama fails both cases here and passes the f64 reference tests.)
#include <gtest/gtest.h>

#include <fstream>

#include "base/thread_pool.h"
#include "deferkv/session.h"
#include "model/reference_forward.h"

namespace deferkv {
namespace {

// The tokens the reference files were dumped for (scripts/reference/README.md).
const std::vector<int32_t> kTokens = {1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315,
                                      17,  99,  5,   230, 411, 267, 302, 500, 45,  377, 262, 290};

std::vector<float> read_logits(const std::string& name, size_t count) {
  std::ifstream in(std::string(DEFERKV_TEST_DATA) + "/reference/" + name, std::ios::binary);
  std::vector<float> logits(count);
  in.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(count * sizeof(float)));
  EXPECT_TRUE(in) << name << " holds fewer than " << count << " logits";
  EXPECT_EQ(in.peek(), EOF) << name << " holds more than " << count << " logits";
  return logits;
}

class LlamaCppReference : public ::testing::TestWithParam<std::string> {};

// Every position's logits, prefilled in batches of 5 (several batches, as llama.cpp's one
// batch computes the same function) and the last four decoded one by one.
TEST_P(LlamaCppReference, LogitsOfEveryPositionEqualLlamaCpp) {
  const std::string arch = GetParam();
  auto model = Model::load(std::string(DEFERKV_TEST_DATA) + "/models/" + arch + "-tiny-random.gguf");
  ASSERT_EQ(model->config().arch_name, arch);
  const auto n_vocab = static_cast<size_t>(model->config().n_vocab);
  const std::vector<float> expected = read_logits(arch + "-tiny-random.llamacpp_kvf32.logits", kTokens.size() * n_vocab);
  SessionOptions options;
  options.n_ctx = 64;
  options.n_batch = 5;
  options.all_logits = true;
  options.cache_type_k = options.cache_type_v = "f32";
  Session session(model, std::make_shared<ThreadPool>(2), options);
  const size_t n_prefill = kTokens.size() - 4;
  session.prefill(std::vector<int32_t>(kTokens.begin(), kTokens.begin() + static_cast<int64_t>(n_prefill)));
  auto check = [&](const float* ours, size_t position) {
    const std::vector<double> theirs(expected.begin() + static_cast<int64_t>(position * n_vocab),
                                     expected.begin() + static_cast<int64_t>((position + 1) * n_vocab));
    EXPECT_LT(testing::relative_l2(ours, theirs), 1e-5) << arch << ", position " << position;
  };
  for (size_t t = 0; t < n_prefill; ++t) check(session.logits().data() + t * n_vocab, t);
  for (size_t t = n_prefill; t < kTokens.size(); ++t) {
    session.decode(kTokens[t]);
    check(session.last_logits(), t);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyRandomModels, LlamaCppReference, ::testing::Values("qwen2", "qwen3"));

}  // namespace
}  // namespace deferkv
