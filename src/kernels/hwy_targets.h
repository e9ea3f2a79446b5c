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
// On aarch64 (GCC): NEON, the baseline and so also the fallback there, and SVE and SVE2:
// the length-agnostic forms, and the fixed-length ones dispatch picks on 256-bit SVE CPUs
// (SVE_256: Neoverse V1, Graviton 3) and 128-bit SVE2 ones (SVE2_128: Neoverse N2/V2,
// Graviton 4), whose lane counts are compile-time constants (the int16 kernels' vectors are
// then as wide as the CPU's: kernel_helpers-inl.h's ExactCappedTag); the two fixed-length
// ones add about a tenth to the aarch64 build. SVE vectors are sizeless types, which C++
// allows in no array or class, hence DEFERKV_VECTORS for the register tiles.
// scripts/test_aarch64.sh runs the kernel tests under qemu-user at three vector lengths.
// DEFERKV_MAX_SIMD caps what dispatch picks (kernels/simd_target.h).
#ifndef HWY_DISABLED_TARGETS
#if defined(__aarch64__)
#define HWY_DISABLED_TARGETS 0
#else
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
#endif
