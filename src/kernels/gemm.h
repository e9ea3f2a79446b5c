#pragma once
// Float32 matrix products against row-major weights (the layout matmul's dequantised
// tiles and F32 weights have): y[i * ldy + j] = dot(x row i, w row j) for i in [0, m),
// j in [0, rows), rows of n values, x rows ldx floats apart, w rows ldw apart.
// Single-threaded, like the matvec kernels.
#include <cstddef>
#include <cstdint>

namespace deferkv {

// Reads the weight rows in place (gemm_f32.cpp). For products whose weights are used
// once per call, such as attention's keys.
void gemm_f32_nt(const float* x, int64_t ldx, int64_t m, const float* w, int64_t ldw, int64_t rows, int64_t n,
                 float* y, int64_t ldy);

// The prefill projections' product (gemm_packed.cpp): the weight rows are first packed
// into panels of gemm_panel_rows() rows stored k-major (value k of the panel's rows side
// by side), the last panel padded with zeros, and the tokens, once per product for every
// thread, into panels of gemm_panel_tokens() tokens stored the same way. Each y value is
// then summed in blocks of k in order, the same whatever m, the tiling or the split of
// rows between threads.
int64_t gemm_panel_rows();  // for the CPU's widest vectors: twice its float lanes
// The most rows a panel has on any compiled target: AVX-512's two 16-float vectors (SVE's
// wider ones are capped at 16 floats).
inline constexpr int64_t kGemmMaxPanelRows = 32;
// Floats a packing of `rows` rows of n values takes, for any CPU.
size_t gemm_packed_floats(int64_t rows, int64_t n);
void gemm_pack_rows(const float* w, int64_t ldw, int64_t rows, int64_t n, float* packed);
// The same from fp16 rows (ldw in elements) into panels of fp16 values, in the same places
// (the gemm_packed_floats(rows, n) floats hold them with room to spare).
void gemm_pack_rows_f16(const uint16_t* w, int64_t ldw, int64_t rows, int64_t n, uint16_t* packed);

int64_t gemm_panel_tokens();  // the micro-kernel's tokens on this CPU
// The most tokens a panel has on any compiled target (AVX-512's).
inline constexpr int64_t kGemmMaxPanelTokens = 12;
// Floats the token panels of m tokens of n values take, for any CPU.
size_t gemm_packed_tokens_floats(int64_t m, int64_t n);
// Writes token panels [first_panel, first_panel + panels) of the m tokens (rows of x, ldx
// floats apart) into `out` (all panels, gemm_packed_tokens_floats); tokens past m are
// zeros. Threads may write disjoint panels at once.
void gemm_pack_tokens(const float* x, int64_t ldx, int64_t n, int64_t m, int64_t first_panel, int64_t panels,
                      float* out);
// y[i * ldy + j] = dot(token i, weight row j) for i < m, j < rows, the tokens as
// gemm_pack_tokens left them and the rows as gemm_pack_rows did.
void gemm_f32_packed(const float* tokens, int64_t m, const float* packed, int64_t rows, int64_t n, float* y,
                     int64_t ldy);
// The same with fp16 panels (gemm_pack_rows_f16's), widened as they are read; its k-blocks
// are twice as long as gemm_f32_packed's (the same bytes), so the sums may differ from
// gemm_f32_packed's of the widened rows in their last bits.
void gemm_f16_packed(const float* tokens, int64_t m, const uint16_t* packed, int64_t rows, int64_t n, float* y,
                     int64_t ldy);

}  // namespace deferkv
