// The benchmark program's main: Google Benchmark's, after DEFERKV_MAX_SIMD (an AVX-512
// machine timing the AVX2 kernels: kernels/simd_target.h), with the instruction set the
// kernels ran on in the report's context ("simd_target"), since a capped run and an
// uncapped one must not be read as the same.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <exception>

#include "kernels/simd_target.h"

int main(int argc, char** argv) {
  try {
    deferkv::cap_simd_target_from_environment();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  benchmark::AddCustomContext("simd_target", deferkv::simd_target_name());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
