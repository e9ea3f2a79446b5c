#pragma once
// Which instruction sets the Highway kernels are compiled for. Include this before
// <hwy/foreach_target.h> in every kernel translation unit.
//
// Dynamic dispatch picks the best of these at run time. SSSE3/SSE4 are dropped to
// keep compile time down (every target multiplies the object code): x86-64 machines
// without AVX2 fall back to the portable one-lane target, which is slow but correct.
// AVX3 (AVX-512 F/BW/DQ/VL) is the fast path; AVX3_DL (Ice Lake+/Zen 4+: adds VNNI
// etc.) is opted in as well so the kernels may use instructions only it guarantees.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
