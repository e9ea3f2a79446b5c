// Q-Filters (qfilter:filters=PATH) against its rule evaluated in double precision on the
// reference forward's keys: each KV head keeps the b entries of largest -<f, k_j>, f the
// head's filter from a safetensors file the test writes (tensor q_filters [layers, KV
// heads, head_dim], Hugging Face's head dimension order, permuted for this llama model's
// interleaved RoPE). Also the refusals of a file for another model, for both per-model
// files (Q-Filters, Expected Attention's statistics).
//
// Mutants applied to the engine, run, seen failing, reverted (the tests that failed):
//   the score's sign flipped (+<f, k>)                              -> KeepsTheKeysOfLargestNegativeProjection...
//   no dimension permutation (trained_tensors.cpp's file_head_dim
//   returns m)                                                      -> KeepsTheKeysOfLargestNegativeProjection...
//   the filters' shape not checked at on_attach                     -> FilesForAnotherModelAreRefusedNamingTheMismatch
//   expected_attention's stats shape not checked at on_attach       -> FilesForAnotherModelAreRefusedNamingTheMismatch
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "deferkv/error.h"
#include "model/reference_forward.h"
#include "model/test_models.h"
#include "press/kept_set_reference.h"
#include "press/press_test_util.h"
#include "support/scratch_dir.h"
#include "tensor/safetensors_test_util.h"

namespace deferkv {
namespace {

using testing::Positions;
using testing::Scores;

constexpr int64_t kPrompt = 96, kBudget = 40, kLayers = 2, kHeads = 4, kKvHeads = 2, kDim = 16;

std::string model_path() {
  RandomModelSpec spec;  // llama: interleaved RoPE
  spec.n_embd = 64;
  spec.n_layer = kLayers;
  spec.n_head = kHeads;
  spec.n_head_kv = kKvHeads;
  spec.n_ff = 128;
  spec.seed = 31;
  return testing::random_model_path(spec);
}

std::vector<int32_t> prompt() {
  std::vector<int32_t> tokens(400);
  std::iota(tokens.begin(), tokens.end(), 3);
  std::shuffle(tokens.begin(), tokens.end(), std::mt19937(13));
  return std::vector<int32_t>(tokens.begin(), tokens.begin() + kPrompt);
}

const testing::ReferenceTrace& trace() {
  static const testing::ReferenceTrace t = testing::reference_trace(model_path(), prompt(), testing::KeyVisibility{});
  return t;
}

// Filters [layer][KV head][dim] in the model's dimension order, multiples of 1/8 in
// [-2, 2] (exact in BF16 as in F32), and the same in Hugging Face's order: model dimension
// 2i + h is Hugging Face's h * kDim / 2 + i.
using Filters = std::vector<float>;
Filters model_order_filters() {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> eighths(-16, 16);
  Filters f(kLayers * kKvHeads * kDim);
  for (float& x : f) x = static_cast<float>(eighths(rng)) / 8.0f;
  return f;
}
Filters to_hugging_face_order(const Filters& model) {
  Filters hf(model.size());
  for (size_t row = 0; row < model.size() / kDim; ++row) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < kDim / 2; ++i) hf[row * kDim + h * kDim / 2 + i] = model[row * kDim + 2 * i + h];
    }
  }
  return hf;
}

safetensors_test::RawTensor bf16_tensor(const std::string& name, std::vector<int64_t> shape, const Filters& values) {
  safetensors_test::RawTensor t{name, "BF16", std::move(shape), {}};
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);  // exact in BF16: the low half is zero
    t.bytes.push_back(static_cast<uint8_t>((bits >> 16) & 0xff));
    t.bytes.push_back(static_cast<uint8_t>(bits >> 24));
  }
  return t;
}

std::string write_filters(const std::string& name, const Filters& values, const std::string& dtype = "F32",
                          std::vector<int64_t> shape = {kLayers, kKvHeads, kDim}) {
  const std::string path = testing::scratch_file(name);
  safetensors_test::write_safetensors(
      path, {{"format", "pt"}},
      {dtype == "BF16" ? bf16_tensor("q_filters", shape, values) : safetensors_test::f32_tensor("q_filters", shape, values)});
  return path;
}

// -<f, k_j> for every prompt entry of KV head g of layer l, f in the model's order.
Scores qfilter_scores(const Filters& model_order, int64_t l, int64_t g) {
  Scores s;
  for (int64_t j = 0; j < kPrompt; ++j) {
    double dot = 0;
    for (int64_t m = 0; m < kDim; ++m) dot += double(model_order[(l * kKvHeads + g) * kDim + m]) * trace().keys[l][j][g * kDim + m];
    s.push_back(-dot);
  }
  return s;
}

// The smallest gap between the b-th and (b+1)-th best score of any head, relative to the
// spread: the float engine is compared exactly only where it is wide.
double closest_cut(const Filters& f) {
  double closest = 1;
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kKvHeads; ++g) {
      Scores s = qfilter_scores(f, l, g);
      std::sort(s.begin(), s.end(), std::greater<>());
      closest = std::min(closest, (s[kBudget - 1] - s[kBudget]) / (s.front() - s.back()));
    }
  }
  return closest;
}

void expect_kept(const std::string& spec, const Filters& model_order) {
  SCOPED_TRACE(spec);
  const auto run = testing::run_press_on_model(model_path(), spec, KvBudget::per_head(kBudget), prompt(), 1);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kKvHeads; ++g) {
      Positions want = testing::best(qfilter_scores(model_order, l, g), kBudget);
      want.push_back(kPrompt);  // the generated entry
      EXPECT_EQ(run.positions[l][g], want) << "layer " << l << " KV head " << g;
    }
  }
}

TEST(KeptSetQFilter, KeepsTheKeysOfLargestNegativeProjectionOnTheFilter) {
  const Filters model = model_order_filters(), hf = to_hugging_face_order(model);
  ASSERT_GT(closest_cut(model), 1e-4);
  expect_kept("qfilter:filters=" + write_filters("qfilter.safetensors", hf), model);
  // BF16 as kvpress's model dtype, and the folder save_pretrained writes.
  const std::filesystem::path folder = testing::scratch_file("qfilter-folder");
  std::filesystem::create_directories(folder);
  const std::string bf16 = write_filters("qfilter-bf16.safetensors", hf, "BF16");
  std::filesystem::copy_file(bf16, folder / "model.safetensors", std::filesystem::copy_options::overwrite_existing);
  expect_kept("qfilter:filters=" + folder.string(), model);
  // dim_order=model: the file's dimensions are taken as they are.
  expect_kept("qfilter:dim_order=model,filters=" + write_filters("qfilter-model-order.safetensors", model), model);
}

// An error naming every part, from make_press (reading the file) or from the run
// (attaching it to the model).
void expect_refused(const std::string& spec, const std::vector<std::string>& parts) {
  SCOPED_TRACE(spec);
  try {
    testing::run_press_on_model(model_path(), spec, KvBudget::per_head(kBudget), prompt(), 1);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(KeptSetQFilter, FilesForAnotherModelAreRefusedNamingTheMismatch) {
  const Filters three_heads(kLayers * 3 * kDim, 0.5f);
  const std::string heads = write_filters("qfilter-3-heads.safetensors", three_heads, "F32", {kLayers, 3, kDim});
  expect_refused("qfilter:filters=" + heads, {heads, "[2, 3, 16]", "2 KV heads"});
  const std::string layers = write_filters("qfilter-1-layer.safetensors", Filters(kKvHeads * kDim), "F32", {1, kKvHeads, kDim});
  expect_refused("qfilter:filters=" + layers, {layers, "2 layers"});
  const std::string flat = write_filters("qfilter-flat.safetensors", Filters(kKvHeads * kDim), "F32", {kKvHeads, kDim});
  expect_refused("qfilter:filters=" + flat, {flat, "q_filters", "2 dimensions"});
  expect_refused("qfilter", {"filters=PATH"});
  expect_refused("qfilter:filters=/nonexistent/q.safetensors", {"/nonexistent/q.safetensors"});
  // Expected Attention's statistics: query heads, not KV heads.
  const std::string stats = testing::scratch_file("stats-kv-heads.safetensors");
  safetensors_test::write_safetensors(
      stats, {},
      {safetensors_test::f32_tensor("query_mean", {kLayers, kKvHeads, kDim}, std::vector<float>(kLayers * kKvHeads * kDim)),
       safetensors_test::f32_tensor("query_cov", {kLayers, kKvHeads, kDim, kDim},
                                    std::vector<float>(kLayers * kKvHeads * kDim * kDim))});
  expect_refused("expected_attention:stats=" + stats, {stats, "query_mean", "4 query heads"});
}

}  // namespace
}  // namespace deferkv
