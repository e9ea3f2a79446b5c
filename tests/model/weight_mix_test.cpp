// llama.cpp's mixes (model/weight_mix.h) against hand-derived tables: which blocks' attn_v
// and ffn_down go up to Q6_K, the output's Q6_K, and the fallbacks for rows that do not fit
// a 256-value block. The files themselves and their forward pass: forward_test.cpp.
#include "model/weight_mix.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

namespace deferkv {
namespace {

MixedMatrix matrix(MatrixRole role, int64_t layer, int64_t n_layer, int64_t cols = 256) {
  return {"blk.x.test.weight", role, cols, layer, n_layer, false};
}

// The blocks whose attn_v and ffn_down an _M mix keeps at Q6_K, worked out by hand from
// llama.cpp's rule (the first and last eighth, and every third block from the first eighth
// on, counting from 2): n/8 and 7n/8 are integer divisions.
const std::set<int64_t> kPromoted16 = {0, 1, 4, 7, 10, 13, 14, 15};  // n/8 = 2, 7n/8 = 14
const std::set<int64_t> kPromoted8 = {0, 3, 6, 7};                   // n/8 = 1, 7n/8 = 7
const std::set<int64_t> kPromoted2 = {1};                            // n/8 = 0, 7n/8 = 1

void expect_medium_mix(WeightMix mix, DType base, int64_t n_layer, const std::set<int64_t>& promoted) {
  SCOPED_TRACE(weight_mix_name(mix));
  SCOPED_TRACE(n_layer);
  for (int64_t l = 0; l < n_layer; ++l) {
    const DType more = promoted.count(l) ? DType::Q6_K : base;
    EXPECT_EQ(mixed_matrix_type(mix, DType::F32, matrix(MatrixRole::kAttnV, l, n_layer)), more) << l;
    EXPECT_EQ(mixed_matrix_type(mix, DType::F32, matrix(MatrixRole::kFfnDown, l, n_layer, 512)), more) << l;
    for (MatrixRole role : {MatrixRole::kAttnQ, MatrixRole::kAttnK, MatrixRole::kAttnOutput, MatrixRole::kFfnGate,
                            MatrixRole::kFfnUp}) {
      EXPECT_EQ(mixed_matrix_type(mix, DType::F32, matrix(role, l, n_layer)), base) << l;
    }
  }
  EXPECT_EQ(mixed_matrix_type(mix, DType::F32, matrix(MatrixRole::kOutput, 0, n_layer)), DType::Q6_K);
  EXPECT_EQ(mixed_matrix_type(mix, DType::F32, matrix(MatrixRole::kTokenEmbd, 0, n_layer)), base);
  MixedMatrix tied = matrix(MatrixRole::kTokenEmbd, 0, n_layer);
  tied.tied_output = true;  // the embeddings are the output projection too: they get its Q6_K
  EXPECT_EQ(mixed_matrix_type(mix, DType::F32, tied), DType::Q6_K);
}

TEST(WeightMix, MediumMixesPromoteAttnVAndFfnDownOfTheHandDerivedBlocks) {
  for (auto [mix, base] : {std::pair{WeightMix::kQ4_K_M, DType::Q4_K}, std::pair{WeightMix::kQ5_K_M, DType::Q5_K}}) {
    expect_medium_mix(mix, base, 16, kPromoted16);
    expect_medium_mix(mix, base, 8, kPromoted8);
    expect_medium_mix(mix, base, 2, kPromoted2);
  }
}

TEST(WeightMix, Q6KIsQ6KEverywhere) {
  for (MatrixRole role : {MatrixRole::kTokenEmbd, MatrixRole::kOutput, MatrixRole::kAttnQ, MatrixRole::kAttnK,
                          MatrixRole::kAttnV, MatrixRole::kAttnOutput, MatrixRole::kFfnGate, MatrixRole::kFfnUp,
                          MatrixRole::kFfnDown}) {
    for (int64_t l = 0; l < 8; ++l) EXPECT_EQ(mixed_matrix_type(WeightMix::kQ6_K, DType::F32, matrix(role, l, 8)), DType::Q6_K);
  }
}

TEST(WeightMix, RowsThatDoNotFitA256BlockFallBackAsLlamaCppDoes) {
  // 288 values: a multiple of 32, not of 256. Q6_K falls back to Q8_0, the output too.
  EXPECT_EQ(mixed_matrix_type(WeightMix::kQ6_K, DType::F32, matrix(MatrixRole::kAttnQ, 0, 8, 288)), DType::Q8_0);
  EXPECT_EQ(mixed_matrix_type(WeightMix::kQ4_K_M, DType::F32, matrix(MatrixRole::kOutput, 0, 8, 288)), DType::Q8_0);
  EXPECT_EQ(mixed_matrix_type(WeightMix::kQ4_K_M, DType::F32, matrix(MatrixRole::kAttnV, 0, 8, 288)), DType::Q8_0);
  // 100 values: not even a multiple of 32, so F16 whatever was chosen.
  for (WeightMix mix : {WeightMix::kQ4_K_M, WeightMix::kQ5_K_M, WeightMix::kQ6_K}) {
    EXPECT_EQ(mixed_matrix_type(mix, DType::F32, matrix(MatrixRole::kAttnQ, 1, 8, 100)), DType::F16);
    EXPECT_EQ(mixed_matrix_type(mix, DType::F32, matrix(MatrixRole::kOutput, 0, 8, 100)), DType::F16);
  }
  // Q4_K and Q5_K fall back to Q5_0 and Q5_1, which deferkv has no kernels for: refused by name.
  for (auto [mix, fallback] : {std::pair{WeightMix::kQ4_K_M, "Q5_0"}, std::pair{WeightMix::kQ5_K_M, "Q5_1"}}) {
    try {
      mixed_matrix_type(mix, DType::F32, matrix(MatrixRole::kAttnQ, 1, 8, 288));
      ADD_FAILURE() << "no error";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("blk.x.test.weight"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fallback), std::string::npos) << e.what();
    }
  }
}

TEST(WeightMix, UniformIsTheOneTypeOrANamedError) {
  EXPECT_EQ(mixed_matrix_type(WeightMix::kUniform, DType::Q4_K, matrix(MatrixRole::kOutput, 0, 8)), DType::Q4_K);
  EXPECT_EQ(mixed_matrix_type(WeightMix::kUniform, DType::F16, matrix(MatrixRole::kAttnV, 0, 8, 100)), DType::F16);
  try {
    mixed_matrix_type(WeightMix::kUniform, DType::Q8_0, matrix(MatrixRole::kAttnQ, 0, 8, 100));
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("blk.x.test.weight has rows of 100 values"), std::string::npos) << e.what();
  }
}

TEST(WeightMix, NamesAndLlamaFileTypes) {
  EXPECT_EQ(weight_mix_from_name("q4_k_m"), WeightMix::kQ4_K_M);
  EXPECT_EQ(weight_mix_from_name("Q5_K_M"), WeightMix::kQ5_K_M);
  EXPECT_EQ(weight_mix_from_name("q6_k"), WeightMix::kQ6_K);
  EXPECT_EQ(weight_mix_from_name("q4_k"), std::nullopt);  // a single type, not a mix
  EXPECT_EQ(weight_mix_from_name("q4_k_l"), std::nullopt);
  // llama.h's llama_ftype numbers.
  EXPECT_EQ(llama_file_type(WeightMix::kQ4_K_M, DType::F32), 15u);
  EXPECT_EQ(llama_file_type(WeightMix::kQ5_K_M, DType::F32), 17u);
  EXPECT_EQ(llama_file_type(WeightMix::kQ6_K, DType::F32), 18u);
  EXPECT_EQ(llama_file_type(WeightMix::kUniform, DType::Q8_0), 7u);
  EXPECT_EQ(llama_file_type(WeightMix::kUniform, DType::BF16), 32u);
  EXPECT_EQ(llama_file_type_name(15), "Q4_K_M");
  EXPECT_EQ(llama_file_type_name(14), "Q4_K_S");
  EXPECT_EQ(llama_file_type_name(5), std::nullopt);  // removed from llama.cpp
}

}  // namespace
}  // namespace deferkv
