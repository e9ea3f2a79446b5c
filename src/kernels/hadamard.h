#pragma once
// The orthonormal Walsh-Hadamard transform of order n (a power of two): H[i][j] =
// (-1)^popcount(i & j) / sqrt(n). H is symmetric and its own inverse (H H = I), and it
// keeps dot products (Hx . Hy = x . y), so a vector can be stored rotated and read back by
// applying H again. The KV cache rotates its quantised rows with it (kv_rows.h,
// KvRowCoding).
#include <cstdint>

namespace deferkv {

// The order a row of head_dim values is rotated with: the largest power of two that
// divides head_dim (64 -> 64, 96 -> 32), so the transform spreads a large value over as
// many of the row's values as it can.
inline int64_t hadamard_order(int64_t head_dim) { return head_dim & -head_dim; }

// x = H x for each block of `order` consecutive values of x, in place; n a multiple of order.
void hadamard_blocks(float* x, int64_t n, int64_t order);

}  // namespace deferkv
