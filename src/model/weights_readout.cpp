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
  std::vector<uint8_t> packed(packed_activation_bytes(w.type, w.cols));
  pack_activation(w.type, normed.data(), w.cols, packed.data());
  pool_.parallel_for(w.rows, kLogitRowsPerChunk, [&](int64_t begin, int64_t end, int) {
    matvec(w.type, w.row(begin), w.row_stride, w.cols, packed.data(), out + begin, end - begin);
  });
}

void WeightsReadout::lm_head_rows(const int32_t* tokens, int64_t n, float* out) const {
  const WeightMatrix& w = weights_.output;
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= w.rows) fail("token id {} is out of the vocabulary (0..{})", tokens[i], w.rows - 1);
    dequantize_row(w.type, w.row(tokens[i]), out + i * w.cols, w.cols);
  }
}

void WeightsReadout::attention_output(int64_t layer, float* out) const {
  if (layer < 0 || layer >= config_.n_layer) fail("layer {} is out of range (0..{})", layer, config_.n_layer - 1);
  const WeightMatrix& w = weights_.layers[static_cast<size_t>(layer)].wo;
  for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w.type, w.row(r), out + r * w.cols, w.cols);
}

}  // namespace deferkv
