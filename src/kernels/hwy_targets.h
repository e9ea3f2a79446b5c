#pragma once
// Which instruction sets the Highway kernels are compiled for. Include this before
// <hwy/foreach_target.h> in every kernel translation unit.
//
// Dynamic dispatch picks the best of AVX3 (AVX-512 F/BW/DQ/VL), AVX2 and the portable
// one-lane fallback at run time. SSSE3/SSE4 are dropped to keep compile time down (each
// target is another copy of every kernel): x86-64 machines without AVX2 get the
// fallback, slow but correct. AVX3_DL (adds VNNI) is not compiled either: most kernels
// use no instruction it would add, and building it for them changed nothing measurable.
// The exception asks for it itself (HWY_WANT_AVX3_DL): gemm_int16.cpp for vpdpwssd. (The
// int8-activation K-quant matvecs did, for vpdpbusd, until their 256-bit maddubs form
// measured faster on Zen 4: matvec_k4_int8.cpp.)
//
// On aarch64 (GCC): NEON and the fallback, not SVE yet. SVE's vectors are sizeless types,
// which C++ does not allow as array elements or struct members, and most kernels keep
// their register tiles in arrays of vectors (gemm_f32.cpp, gemm_packed.cpp, matvec_float.cpp,
// kv_rows_half.cpp, the matvec_q*.cpp through kernel_helpers-inl.h's MatvecByBlocks) or
// assume a vector of at most 64 bytes (gemm_packed.cpp's panel rows, matvec_q8_0.cpp's
// lanes per block): the SVE build of them does not compile (scripts/test_aarch64.sh,
// which runs the NEON build under qemu-user). DEFERKV_MAX_SIMD caps what dispatch picks
// (kernels/simd_target.h).
#ifndef HWY_DISABLED_TARGETS
#if defined(__aarch64__)
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#else
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
#endif
