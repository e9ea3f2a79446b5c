#include "model/weights_readout.h"

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "kernels/matvec.h"
#include "kernels/quant.h"
#include "kernels/vec.h"

namespace deferkv {
namespace {

// Rows of the LM head one thread takes (the forward pass splits its matvecs likewise).
constexpr int64_t kLogitRowsPerChunk = 256;

}  // namespace

void WeightsReadout::logits(const float* residual, float* out) const {
  const WeightMatrix& w = weights_.output;
  std::vector<float> normed(static_cast<size_t>(config_.n_embd));
  rms_norm_f32(residual, weights_.output_norm.data(), config_.rms_eps, normed.data(), config_.n_embd);
  if (w.layout == WeightLayout::kRowGroups) {
    static_assert(kLogitRowsPerChunk % kGroupRows == 0);
    std::vector<uint8_t> packed(row_groups_activation_bytes(w.type, w.cols));
    pack_row_groups_activation(w.type, normed.data(), w.cols, packed.data());
    pool_.parallel_for(w.rows, kLogitRowsPerChunk, [&](int64_t begin, int64_t end, int) {
      matvec_row_groups(w.type, w.group(begin), w.cols, packed.data(), 0, 1, out + begin, w.rows, end - begin);
    });
    return;
  }
  std::vector<uint8_t> packed(packed_activation_bytes(w.type, w.cols));
  pack_activation(w.type, normed.data(), w.cols, packed.data());
  pool_.parallel_for(w.rows, kLogitRowsPerChunk, [&](int64_t begin, int64_t end, int) {
    matvec(w.type, w.row(begin), w.row_stride, w.cols, packed.data(), out + begin, end - begin);
  });
}

void WeightsReadout::lm_head_rows(const int32_t* tokens, int64_t n, float* out) const {
  const WeightMatrix& w = weights_.output;
  std::vector<uint8_t> row(w.row_stride);
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= w.rows) fail("token id {} is out of the vocabulary (0..{})", tokens[i], w.rows - 1);
    w.copy_rows(tokens[i], 1, row.data());
    dequantize_row(w.type, row.data(), out + i * w.cols, w.cols);
  }
}

void WeightsReadout::attention_output(int64_t layer, float* out) const {
  if (layer < 0 || layer >= config_.n_layer) fail("layer {} is out of range (0..{})", layer, config_.n_layer - 1);
  const WeightMatrix& w = weights_.layers[static_cast<size_t>(layer)].wo;
  std::vector<uint8_t> row(w.row_stride);
  for (int64_t r = 0; r < w.rows; ++r) {
    w.copy_rows(r, 1, row.data());
    dequantize_row(w.type, row.data(), out + r * w.cols, w.cols);
  }
}

}  // namespace deferkv
