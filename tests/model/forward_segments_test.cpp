// ForwardPass::run over several segments against each segment's own pass: a decode step of
// several sequences gives every sequence's logits and cache bit for bit, whatever the weight
// type: the rows take the multi-row matvec kernels (matvec_rows), whose every row is bit for
// bit the single token's matvec. (Through the GEMM route instead,
// F16's 40 rows round differently from its matvec and this test fails; F32's GEMM happened
// to give the same bits.)
#include <gtest/gtest.h>

#include "base/thread_pool.h"
#include "deferkv/model.h"
#include "kv/kv_cache.h"
#include "model/forward_pass.h"
#include "model/test_models.h"

namespace deferkv {
namespace {

class ForwardSegmentsTest : public ::testing::TestWithParam<DType> {};

TEST_P(ForwardSegmentsTest, ADecodeStepOfSeveralSequencesEqualsEachOneAlone) {
  RandomModelSpec spec;
  spec.n_embd = 128;
  spec.n_head = 4;
  spec.n_ff = 256;
  spec.weight_type = GetParam();
  const auto model = Model::load(testing::random_model_path(spec));
  const ModelConfig& c = model->config();
  ThreadPool pool(2);
  constexpr int64_t kSequences = 40;  // above F32's and F16's GEMM thresholds (8 and 32 rows)
  constexpr int64_t kCtx = 64;
  ForwardPass batched(c, model->weights(), kSequences, kCtx, pool);
  ForwardPass alone(c, model->weights(), 64, kCtx, pool);
  auto cache = [&] { return std::make_unique<KvCache>(c.n_layer, c.n_head_kv, c.head_dim, kCtx, KvCacheTypes{}); };
  std::vector<std::unique_ptr<KvCache>> together, apart;
  std::vector<int32_t> tokens(kSequences), positions(kSequences);
  for (int64_t s = 0; s < kSequences; ++s) {
    together.push_back(cache());
    apart.push_back(cache());
    // Prompts of different lengths, so the caches are ragged across sequences.
    std::vector<int32_t> prompt(static_cast<size_t>(3 + s));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((7 * s + 3 * i + 1) % c.n_vocab);
    std::vector<int32_t> pos(prompt.size());
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
    alone.run(prompt.data(), pos.data(), static_cast<int64_t>(prompt.size()), *together.back(), false, nullptr);
    alone.run(prompt.data(), pos.data(), static_cast<int64_t>(prompt.size()), *apart.back(), false, nullptr);
    tokens[static_cast<size_t>(s)] = static_cast<int32_t>((11 * s + 5) % c.n_vocab);
    positions[static_cast<size_t>(s)] = static_cast<int32_t>(prompt.size());
  }
  const auto n_vocab = static_cast<size_t>(c.n_vocab);
  std::vector<float> logits_together(kSequences * n_vocab), logits_apart(kSequences * n_vocab);
  std::vector<ForwardSegment> segments;
  for (int64_t s = 0; s < kSequences; ++s) {
    segments.push_back({&tokens[static_cast<size_t>(s)], &positions[static_cast<size_t>(s)], 1,
                        together[static_cast<size_t>(s)].get(), nullptr, nullptr,
                        logits_together.data() + static_cast<size_t>(s) * n_vocab});
  }
  batched.run(segments);
  for (int64_t s = 0; s < kSequences; ++s) {
    const auto i = static_cast<size_t>(s);
    alone.run(&tokens[i], &positions[i], 1, *apart[i], false, logits_apart.data() + i * n_vocab);
  }
  for (int64_t s = 0; s < kSequences; ++s) {
    const auto i = static_cast<size_t>(s);
    EXPECT_TRUE(std::equal(logits_apart.begin() + i * n_vocab, logits_apart.begin() + (i + 1) * n_vocab,
                           logits_together.begin() + i * n_vocab))
        << "sequence " << s;
    for (int64_t layer = 0; layer < c.n_layer; ++layer) {
      EXPECT_EQ(together[i]->entries(layer), apart[i]->entries(layer)) << "sequence " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, ForwardSegmentsTest, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace deferkv
