#pragma once
// The widest instruction set the kernels' dynamic dispatch may pick, capped on request so
// that one machine runs (and benchmarks) the code every narrower CPU class gets: an
// AVX-512 machine capped at AVX2 runs the AVX2 kernels a laptop without AVX-512 runs.
//
// DEFERKV_MAX_SIMD=<name> in the environment caps it for the CLI, the benchmark program
// and the test programs. Names, narrowest first: x86 scalar, avx2, avx3 (AVX-512),
// avx3_dl (AVX-512 with VNNI); aarch64 scalar, neon, sve, sve2 (NEON is also the fallback
// there, so scalar runs NEON: hwy_targets.h; sve includes SVE_256, sve2 SVE2_128). A cap
// above what the CPU has, or below what is built, changes nothing; a name this build does
// not know is an error naming the known ones.
#include <cstdint>
#include <string>

namespace deferkv {

// The environment variable's name.
inline constexpr const char* kMaxSimdVariable = "DEFERKV_MAX_SIMD";

// Caps dispatch at `name` (one of the names above, any case) for the whole process; call
// before the first kernel runs. Error naming the known names when it is none of them.
void cap_simd_target(const std::string& name);

// cap_simd_target($DEFERKV_MAX_SIMD) when the variable is set and not empty.
void cap_simd_target_from_environment();

// Highway's name of the instruction set the kernels run on now ("AVX2", "AVX3", "NEON").
std::string simd_target_name();

// The Highway targets the kernels are built for (hwy_targets.h's HWY_TARGETS; gemm_int16.cpp
// adds AVX3_DL of its own), for tests that force each one in turn.
int64_t built_simd_targets();
// The kernels' static target (what their compile flags allow everywhere, e.g. AVX3 under the
// sanitizer builds' -march=native). Highway never disables it, so no cap goes below it.
int64_t static_simd_target();

}  // namespace deferkv
