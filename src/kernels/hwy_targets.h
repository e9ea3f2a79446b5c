#pragma once
// Which instruction sets the Highway kernels are compiled for. Include this before
// <hwy/foreach_target.h> in every kernel translation unit.
//
// Dynamic dispatch picks the best of AVX3 (AVX-512 F/BW/DQ/VL), AVX2 and the portable
// one-lane fallback at run time. SSSE3/SSE4 are dropped to keep compile time down (each
// target is another copy of every kernel): x86-64 machines without AVX2 get the
// fallback, slow but correct. AVX3_DL (adds VNNI) is not compiled either: these kernels
// use no instruction it would add, and building it for them changed nothing measurable.
// The one exception, gemm_int16.cpp, asks for it itself (HWY_WANT_AVX3_DL) for vpdpwssd.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
