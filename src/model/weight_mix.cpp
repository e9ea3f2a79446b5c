#include "model/weight_mix.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "deferkv/error.h"

namespace deferkv {
namespace {

// The facts below are llama.cpp's (src/llama-quant.cpp, September 2026), for the models
// deferkv runs: dense (no experts), not Falcon, below 70B, no importance matrix, no
// per-tensor overrides. llama.cpp counts the attn_v and ffn_down tensors in file order;
// a dense model has one of each per block, so the count is the block's index.

// llama.cpp's use_more_bits: the first and last eighth of the blocks, and every third
// block in between, get Q6_K for attn_v and ffn_down in the _M mixes.
bool more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

DType base_type(WeightMix mix) {
  switch (mix) {
    case WeightMix::kQ4_K_M: return DType::Q4_K;
    case WeightMix::kQ5_K_M: return DType::Q5_K;
    case WeightMix::kQ6_K: return DType::Q6_K;
    case WeightMix::kUniform: break;
  }
  fail("internal: the uniform mix has no base type");
}

bool fits(DType type, int64_t cols) { return cols % dtype_block_elems(type) == 0; }

// llama.cpp's fallback for a row length the chosen type's block does not divide: the
// 32-value type nearest in bits, and F16 when that does not divide it either.
DType fallback(DType chosen, const MixedMatrix& m) {
  if (fits(chosen, m.cols)) return chosen;
  DType smaller = DType::F16;
  switch (chosen) {
    case DType::Q6_K: smaller = DType::Q8_0; break;
    case DType::Q4_K:
    case DType::Q5_K:
      if (m.cols % 32 != 0) return DType::F16;
      fail("make-model: tensor {} has rows of {} values, not a multiple of 256; llama.cpp stores it as {}, "
           "which deferkv cannot compute with",
           m.name, m.cols, chosen == DType::Q4_K ? "Q5_0" : "Q5_1");
    default: smaller = chosen; break;
  }
  return fits(smaller, m.cols) ? smaller : DType::F16;
}

DType mix_choice(WeightMix mix, const MixedMatrix& m) {
  const DType base = base_type(mix);
  const bool output = m.role == MatrixRole::kOutput || (m.tied_output && m.role == MatrixRole::kTokenEmbd);
  if (output) {
    // The output projection gets Q6_K; Q8_0 when its rows do not fit a K-quant's block.
    return fits(base, m.cols) ? DType::Q6_K : DType::Q8_0;
  }
  const bool promoted_role = m.role == MatrixRole::kAttnV || m.role == MatrixRole::kFfnDown;
  if (mix != WeightMix::kQ6_K && promoted_role && more_bits(m.layer, m.n_layer)) return DType::Q6_K;
  return base;
}

constexpr std::array<std::pair<WeightMix, const char*>, 3> kMixNames = {{
    {WeightMix::kQ4_K_M, "Q4_K_M"},
    {WeightMix::kQ5_K_M, "Q5_K_M"},
    {WeightMix::kQ6_K, "Q6_K"},
}};

// llama.h's llama_ftype values that are still in use, by name.
constexpr std::array<std::pair<uint32_t, const char*>, 36> kFileTypes = {{
    {0, "F32"},     {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},     {8, "Q5_0"},
    {9, "Q5_1"},    {10, "Q2_K"},    {11, "Q3_K_S"},  {12, "Q3_K_M"},  {13, "Q3_K_L"},  {14, "Q4_K_S"},
    {15, "Q4_K_M"}, {16, "Q5_K_S"},  {17, "Q5_K_M"},  {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},
    {21, "Q2_K_S"}, {22, "IQ3_XS"},  {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},  {26, "IQ3_S"},
    {27, "IQ3_M"},  {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},  {31, "IQ1_M"},   {32, "BF16"},
    {36, "TQ1_0"},  {37, "TQ2_0"},   {38, "MXFP4_MOE"}, {39, "NVFP4"}, {40, "Q1_0"},    {41, "Q2_0"},
}};

}  // namespace

DType mixed_matrix_type(WeightMix mix, DType uniform, const MixedMatrix& m) {
  if (mix == WeightMix::kUniform) {
    if (!fits(uniform, m.cols)) {
      fail("make-model: tensor {} has rows of {} values, not a multiple of {}'s block size {}", m.name, m.cols,
           dtype_name(uniform), dtype_block_elems(uniform));
    }
    return uniform;
  }
  return fallback(mix_choice(mix, m), m);
}

std::optional<WeightMix> weight_mix_from_name(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const auto& [mix, mix_name] : kMixNames) {
    if (upper == mix_name) return mix;
  }
  return std::nullopt;
}

const char* weight_mix_name(WeightMix mix) {
  for (const auto& [known, name] : kMixNames) {
    if (known == mix) return name;
  }
  return "uniform";
}

std::string weight_mix_names() {
  std::string names;
  for (const auto& [mix, name] : kMixNames) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

uint32_t llama_file_type(WeightMix mix, DType uniform) {
  switch (mix) {
    case WeightMix::kQ4_K_M: return 15;
    case WeightMix::kQ5_K_M: return 17;
    case WeightMix::kQ6_K: return 18;
    case WeightMix::kUniform: break;
  }
  switch (uniform) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q8_0: return 7;
    case DType::Q4_K: return 14;  // Q4_K_S is the nearest llama.cpp name; its output is Q6_K
    case DType::Q5_K: return 16;  // Q5_K_S
    case DType::Q6_K: return 18;
    case DType::BF16: return 32;
  }
  return 0;
}

std::optional<std::string> llama_file_type_name(uint32_t file_type) {
  for (const auto& [id, name] : kFileTypes) {
    if (id == file_type) return std::string(name);
  }
  return std::nullopt;
}

}  // namespace deferkv
