#include "press/methods/behavior_preserving/layer_deletion_model.h"

#include <algorithm>
#include <limits>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "kernels/gemm.h"
#include "kernels/vec.h"

namespace deferkv {
namespace {

// 1 - A is floored here: a head whose whole attention were deleted has no defined output.
constexpr double kMinRemaining = 1e-6;
// Columns of Psi = G W_O one work unit computes.
constexpr int64_t kPsiColumnsPerChunk = 64;
// Multiply-adds below which a task is not worth handing to another thread (waking a
// worker costs microseconds, more on a loaded machine).
constexpr int64_t kMinTaskWork = 1 << 18;

// psi = G W_O [K x q_dim] from G [K x D] and W_O transposed [q_dim x D].
void multiply_into(std::vector<float>& psi, const std::vector<float>& g, int64_t k,
                   const std::vector<float>& w_o_transposed, int64_t dim, int64_t q_dim, ThreadPool& pool) {
  psi.resize(static_cast<size_t>(k * q_dim));
  pool.parallel_for(q_dim, kPsiColumnsPerChunk, [&](int64_t begin, int64_t end, int) {
    gemm_f32_nt(g.data(), dim, k, w_o_transposed.data() + begin * dim, dim, end - begin, dim, psi.data() + begin, q_dim);
  });
}

}  // namespace

void LayerDeletionModel::build(std::vector<LayerReference> references, const std::vector<float>& attention_output,
                               int64_t n_embd, const AttentionShape& shape, const std::vector<KvHeadView>& kv,
                               std::vector<std::vector<int32_t>> candidates, ThreadPool& pool) {
  references_ = std::move(references);
  candidates_ = std::move(candidates);
  group_ = shape.n_head / shape.n_head_kv;
  if (references_.empty()) fail("internal: no reference position to score the cache with");
  top_k_ = references_[0].output->distribution.size();
  const int64_t d = shape.head_dim, q_dim = shape.n_head * d, n_ref = n_references();
  w_o_transposed_.resize(static_cast<size_t>(q_dim * n_embd));
  for (int64_t row = 0; row < n_embd; ++row) {
    for (int64_t col = 0; col < q_dim; ++col) w_o_transposed_[col * n_embd + row] = attention_output[row * q_dim + col];
  }
  psi_.resize(references_.size());
  for (size_t r = 0; r < references_.size(); ++r) {
    if (references_[r].output->distribution.size() != top_k_) fail("internal: reference positions with different K");
    multiply_into(psi_[r], references_[r].output->logit_jacobian, top_k_, w_o_transposed_, n_embd, q_dim, pool);
  }

  values_.resize(candidates_.size());
  attention_.resize(candidates_.size());
  effects_.resize(candidates_.size());
  for (size_t g = 0; g < candidates_.size(); ++g) {
    const auto n_c = static_cast<int64_t>(candidates_[g].size());
    values_[g].resize(static_cast<size_t>(n_c * d));
    // The stored values, dequantised to float32 (as the attention kernels read them).
    for (int64_t c = 0; c < n_c; ++c) kv[g].values.to_f32(candidates_[g][c], 1, values_[g].data() + c * d);
    attention_[g].resize(static_cast<size_t>(n_c * n_ref * group_));
    effects_[g].resize(static_cast<size_t>(n_c * n_ref * group_ * top_k_));
  }

  // One unit per (reference, query head): its attention row, o_h, and e_j = Psi_h o_h - Psi_h v_j.
  pool.parallel_for(n_ref * shape.n_head, 1, [&](int64_t begin, int64_t end, int) {
    std::vector<float> probabilities, output(static_cast<size_t>(d)), psi_output(static_cast<size_t>(top_k_));
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t r = unit / shape.n_head, h = unit % shape.n_head, g = h / group_, i = h % group_;
      const std::vector<int32_t>& cand = candidates_[g];
      if (cand.empty()) continue;
      const KvHeadView& head = kv[g];
      const float* q = references_[r].queries + h * d;
      probabilities.resize(static_cast<size_t>(head.length));
      KvRowReader key(head.keys), value(head.values);  // the stored rows, as float32
      for (int64_t j = 0; j < head.length; ++j) {
        probabilities[j] = head.positions[j] <= references_[r].position ? shape.scale * dot_f32(q, key(j), d)
                                                                         : -std::numeric_limits<float>::infinity();
      }
      softmax_f32(probabilities.data(), head.length);
      std::fill(output.begin(), output.end(), 0.0f);
      for (int64_t j = 0; j < head.length; ++j) axpy_f32(probabilities[j], value(j), output.data(), d);
      const float* psi_h = psi_[r].data() + h * d;  // K rows of d, q_dim apart
      for (int64_t k = 0; k < top_k_; ++k) psi_output[k] = dot_f32(psi_h + k * q_dim, output.data(), d);

      const auto n_c = static_cast<int64_t>(cand.size());
      const int64_t stride = n_ref * group_ * top_k_;  // between candidates
      float* e = effects_[g].data() + (r * group_ + i) * top_k_;
      gemm_f32_nt(values_[g].data(), d, n_c, psi_h, q_dim, top_k_, d, e, stride);
      for (int64_t c = 0; c < n_c; ++c) {
        float* row = e + c * stride;
        for (int64_t k = 0; k < top_k_; ++k) row[k] = psi_output[k] - row[k];
        attention_[g][(c * n_ref + r) * group_ + i] = probabilities[cand[c]];
      }
    }
  });
}

int64_t LayerDeletionModel::candidates_per_task() const {
  return std::max<int64_t>(1, kMinTaskWork / (n_references() * group_ * top_k_));
}

std::vector<std::vector<float>> LayerDeletionModel::singleton_scores(ThreadPool& pool) const {
  std::vector<std::vector<float>> scores(candidates_.size());
  for (size_t g = 0; g < candidates_.size(); ++g) {
    scores[g].resize(candidates_[g].size());
    pool.parallel_for(static_cast<int64_t>(candidates_[g].size()), candidates_per_task(),
                      [&](int64_t begin, int64_t end, int) {
                        std::vector<float> delta_z(static_cast<size_t>(top_k_));
                        for (int64_t c = begin; c < end; ++c) {
                          double total = 0;
                          for (int64_t r = 0; r < n_references(); ++r) {
                            std::fill(delta_z.begin(), delta_z.end(), 0.0f);
                            for (int64_t i = 0; i < group_; ++i) {
                              const double a = attention(g, c, r, i);
                              axpy_f32(static_cast<float>(a / std::max(1.0 - a, kMinRemaining)), effect(g, c, r, i),
                                       delta_z.data(), top_k_);
                            }
                            total += second_order_kl(distribution(r), delta_z.data());
                          }
                          scores[g][c] = static_cast<float>(total / static_cast<double>(n_references()));
                        }
                      });
  }
  return scores;
}

DeletionSet::DeletionSet(const LayerDeletionModel& model)
    : model_(model), n_head_(model.n_head_kv() * model.group()),
      mass_(static_cast<size_t>(model.n_references() * n_head_), 0.0),
      weighted_(static_cast<size_t>(model.n_references() * n_head_ * model.top_k()), 0.0f),
      delta_z_(static_cast<size_t>(model.n_references() * model.top_k()), 0.0f) {}

double DeletionSet::kl() const {
  double total = 0;
  for (int64_t r = 0; r < model_.n_references(); ++r) total += truncated_kl(model_.distribution(r), delta_z(r));
  return total / static_cast<double>(model_.n_references());
}

double DeletionSet::kl_with(int64_t g, int64_t c, std::vector<float>& scratch) const {
  const int64_t k = model_.top_k();
  scratch.resize(static_cast<size_t>(k));
  double total = 0;
  for (int64_t r = 0; r < model_.n_references(); ++r) {
    std::copy(delta_z(r), delta_z(r) + k, scratch.begin());
    for (int64_t i = 0; i < model_.group(); ++i) {
      const double a = model_.attention(g, c, r, i);
      if (a == 0) continue;
      const int64_t h = g * model_.group() + i;
      const double mass = mass_[r * n_head_ + h];
      const double before = std::max(1.0 - mass, kMinRemaining), after = std::max(1.0 - mass - a, kMinRemaining);
      // This head's term N / (1 - A) becomes (N + a e) / (1 - A - a).
      axpy_f32(static_cast<float>(1.0 / after - 1.0 / before), weighted_.data() + (r * n_head_ + h) * k, scratch.data(), k);
      axpy_f32(static_cast<float>(a / after), model_.effect(g, c, r, i), scratch.data(), k);
    }
    total += truncated_kl(model_.distribution(r), scratch.data());
  }
  return total / static_cast<double>(model_.n_references());
}

void DeletionSet::add(const std::vector<std::pair<int64_t, int64_t>>& members) {
  const int64_t k = model_.top_k();
  for (const auto& [g, c] : members) {
    for (int64_t r = 0; r < model_.n_references(); ++r) {
      for (int64_t i = 0; i < model_.group(); ++i) {
        const float a = model_.attention(g, c, r, i);
        const int64_t h = g * model_.group() + i;
        mass_[r * n_head_ + h] += a;
        axpy_f32(a, model_.effect(g, c, r, i), weighted_.data() + (r * n_head_ + h) * k, k);
      }
    }
  }
  std::fill(delta_z_.begin(), delta_z_.end(), 0.0f);
  for (int64_t r = 0; r < model_.n_references(); ++r) {
    for (int64_t h = 0; h < n_head_; ++h) {
      const double remaining = std::max(1.0 - mass_[r * n_head_ + h], kMinRemaining);
      axpy_f32(static_cast<float>(1.0 / remaining), weighted_.data() + (r * n_head_ + h) * k, delta_z_.data() + r * k, k);
    }
  }
}

}  // namespace deferkv
