// Kernel throughput: matvec (decode, including pack_activation) per weight type at
// 4096 x 4096, and matmul (prefill) at m = 512 tokens, single-threaded. Bytes processed
// are the weight bytes read, so the reported rate is weight GB/s; matmul also reports
// GFLOP/s. matvec_rows and matvec_each (8 activations, batched decode) report
// activations per second. matvec runs 5 repetitions and reports their median, as the
// machines this runs on are shared. (A 4096 x 4096 quantised matrix fits in a large L3; real models
// stream from DRAM.)
#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_int16.h"
#include "kernels/matvec.h"
#include "kernels/quant.h"
#include "kernels/row_groups.h"
#include "tensor/dtype.h"

namespace deferkv {
namespace {

constexpr int64_t kRows = 4096;
constexpr int64_t kCols = 4096;

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

// The 4096 x 4096 weight matrix in `type`, quantised once per type.
const std::vector<unsigned char>& weights(DType type) {
  static std::map<DType, std::vector<unsigned char>> cache;
  auto it = cache.find(type);
  if (it == cache.end()) {
    const std::vector<float> w = random_values(kRows * kCols, 1);
    const int64_t row_bytes = dtype_row_bytes(type, kCols);
    std::vector<unsigned char> bytes(static_cast<size_t>(row_bytes * kRows));
    for (int64_t r = 0; r < kRows; ++r) {
      quantize_row(type, w.data() + r * kCols, bytes.data() + r * row_bytes, kCols);
    }
    it = cache.emplace(type, std::move(bytes)).first;
  }
  return it->second;
}

void BM_Matvec(benchmark::State& state, DType type) {
  const auto& w = weights(type);
  const std::vector<float> x = random_values(kCols, 2);
  std::vector<unsigned char> packed(packed_activation_bytes(type, kCols));
  std::vector<float> y(kRows);
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(type, kCols));
  for (auto _ : state) {
    pack_activation(type, x.data(), kCols, packed.data());
    matvec(type, w.data(), row_bytes, kCols, packed.data(), y.data(), kRows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
}

// m activations (decode rows of the batch engine) against the first `cols` columns of
// the matrix's rows (768: the width of the 100M model's projections, whose activations
// all stay in L1), packed once. Rows: matvec_rows, each weight block decoded once per
// group of activations. Each: what linear_by_matvec did before it, matvec per activation
// over 16-row tiles (the tile read from memory once, from cache for the others).
void BM_MatvecRows(benchmark::State& state, DType type, bool rows) {
  const int64_t m = state.range(0), cols = state.range(1);
  const auto& w = weights(type);
  const size_t stride = packed_activation_stride(type, cols);
  const std::vector<float> x = random_values(static_cast<size_t>(m * cols), 4);
  std::vector<unsigned char> packed(stride * static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) pack_activation(type, x.data() + i * cols, cols, packed.data() + i * stride);
  std::vector<float> y(static_cast<size_t>(m * kRows));
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(type, kCols));
  for (auto _ : state) {
    if (rows) {
      matvec_rows(type, w.data(), row_bytes, cols, packed.data(), stride, m, y.data(), kRows, kRows);
    } else {
      for (int64_t r = 0; r < kRows; r += 16) {
        for (int64_t i = 0; i < m; ++i) {
          matvec(type, w.data() + r * row_bytes, row_bytes, cols, packed.data() + i * stride, y.data() + i * kRows + r,
                 16);
        }
      }
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * m);  // activations (tokens) per second
}

// The same product over row groups (row_groups.h): the matrix grouped once, the activation
// packed each time as for BM_Matvec.
void BM_MatvecRowGroups(benchmark::State& state, DType type) {
  const auto& w = weights(type);
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(type, kCols));
  std::vector<unsigned char> groups(row_group_bytes(type, kCols) * (kRows / kGroupRows));
  group_rows(type, w.data(), row_bytes, kCols, kRows, groups.data());
  const std::vector<float> x = random_values(kCols, 2);
  std::vector<unsigned char> packed(row_groups_activation_bytes(type, kCols));
  std::vector<float> y(kRows);
  for (auto _ : state) {
    pack_row_groups_activation(type, x.data(), kCols, packed.data());
    matvec_row_groups(type, groups.data(), kCols, packed.data(), 0, 1, y.data(), kRows, kRows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
}

void BM_Matmul(benchmark::State& state, DType type) {
  init_blas_single_threaded();
  const int64_t m = state.range(0);
  const auto& w = weights(type);
  const std::vector<float> x = random_values(static_cast<size_t>(m * kCols), 3);
  std::vector<float> y(static_cast<size_t>(m * kRows));
  std::vector<float> scratch(scratch_floats_for_matmul(kRows, kCols));
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(type, kCols));
  std::vector<float> tokens(gemm_packed_tokens_floats(m, kCols));
  const int64_t panel = gemm_panel_tokens();
  for (auto _ : state) {
    // As the forward pass runs it: the tokens packed once (for every thread), then the product.
    if (matmul_by_gemm(type, m)) gemm_pack_tokens(x.data(), kCols, kCols, m, 0, (m + panel - 1) / panel, tokens.data());
    matmul(type, w.data(), row_bytes, kCols, kRows, x.data(), kCols, tokens.data(), m, y.data(), kRows, scratch.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(m * kRows * kCols) * 1e-9 *
                                                    static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

// The integer GEMM that prefill takes for the types it serves (gemm_int16.h), the
// tokens' quantisation and panels included, as matmul includes its dequantisation.
void BM_GemmInt16(benchmark::State& state, DType type) {
  const int64_t m = state.range(0);
  const auto& w = weights(type);
  const std::vector<float> x = random_values(static_cast<size_t>(m * kCols), 3);
  std::vector<float> y(static_cast<size_t>(m * kRows));
  std::vector<unsigned char> tokens(gemm_int16_tokens_bytes(type, kCols, m));
  std::vector<unsigned char> scratch(gemm_int16_scratch_bytes(type, kCols));
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(type, kCols));
  const int64_t panel = gemm_int16_panel_tokens();
  for (auto _ : state) {
    gemm_int16_pack_tokens(type, x.data(), kCols, kCols, m, 0, (m + panel - 1) / panel, tokens.data());
    gemm_int16(type, w.data(), row_bytes, kCols, kRows, tokens.data(), m, y.data(), kRows, scratch.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(m * kRows * kCols) * 1e-9 *
                                                    static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

const DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                        DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Registers one benchmark per type, plus a sweep over m for some types: matmul switches
// from matvec to sgemm at a per-type token count (matmul.cpp), chosen from this sweep run
// with each path forced.
const bool kRegistered = [] {
  for (DType type : kTypes) {
    benchmark::RegisterBenchmark((std::string("matvec/") + dtype_name(type)).c_str(), BM_Matvec, type)
        ->Repetitions(5)
        ->ReportAggregatesOnly(true)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("matmul/") + dtype_name(type)).c_str(), BM_Matmul, type)
        ->Arg(512)
        ->Unit(benchmark::kMillisecond);
  }
  for (DType type : kTypes) {
    for (bool rows : {false, true}) {
      benchmark::RegisterBenchmark((std::string(rows ? "matvec_rows/" : "matvec_each/") + dtype_name(type)).c_str(),
                                   BM_MatvecRows, type, rows)
          ->Args({8, 768})
          ->Args({8, 4096})
          ->Repetitions(5)
          ->ReportAggregatesOnly(true)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (DType type : {DType::Q4_0, DType::Q4_K}) {
    benchmark::RegisterBenchmark((std::string("matvec_row_groups/") + dtype_name(type)).c_str(), BM_MatvecRowGroups,
                                 type)
        ->Repetitions(5)
        ->ReportAggregatesOnly(true)
        ->Unit(benchmark::kMicrosecond);
  }
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    benchmark::RegisterBenchmark((std::string("matmul_small_m/") + dtype_name(type)).c_str(), BM_Matmul, type)
        ->RangeMultiplier(2)
        ->Range(4, 128)
        ->Unit(benchmark::kMillisecond);
  }
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    benchmark::RegisterBenchmark((std::string("gemm_int16/") + dtype_name(type)).c_str(), BM_GemmInt16, type)
        ->RangeMultiplier(2)
        ->Range(8, 512)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
}  // namespace deferkv
