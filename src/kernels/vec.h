#pragma once
// Float32 vector kernels (Highway SIMD) used by the forward pass and attention.
#include <cstdint>

namespace deferkv {

float dot_f32(const float* a, const float* b, int64_t n);
void axpy_f32(float a, const float* x, float* y, int64_t n);  // y += a * x
void scale_f32(float a, float* x, int64_t n);                 // x *= a
void add_f32(const float* x, float* y, int64_t n);            // y += x
// out = x / rms(x) * weight, rms over n values with epsilon eps (out may alias x).
void rms_norm_f32(const float* x, const float* weight, float eps, float* out, int64_t n);
// In place: x = exp(x - max) / sum; returns the sum before normalisation.
float softmax_f32(float* x, int64_t n);
// Largest of n values (-inf when n == 0).
float max_f32(const float* x, int64_t n);
// Index of the first of n values that is not above `cut` (a NaN is not), or n if all are.
int64_t first_not_above_f32(const float* x, int64_t n, float cut);
// In place: x = exp(x - shift); returns the sum of the results.
float exp_shift_f32(float* x, float shift, int64_t n);
// The same into `out`, or only the sum when out is nullptr (the same sum either way).
float exp_shift_to_f32(const float* x, float shift, int64_t n, float* out);
// x /= d, each value rounded as a scalar division would be.
void divide_f32(float* x, float d, int64_t n);
// gate = silu(gate) * up
void swiglu_f32(float* gate, const float* up, int64_t n);
// Sum of w_i * (e^{x_i - shift} - 1 - (x_i - shift)): the part of sum w_i (e^u_i - 1)
// beyond first order, computed without the cancellation a direct float evaluation
// suffers for small u (KL divergences of nearby distributions). u is clamped at 80.
float weighted_expm1_excess_f32(const float* w, const float* x, float shift, int64_t n);

}  // namespace deferkv
