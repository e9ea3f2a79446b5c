#pragma once
// What the forward pass shows an observer after its last layer: the final residual
// stream (the input of the final RMSNorm) of every token in the batch. Presses that
// score entries by their effect on the model's output read it (see model_readout.h).
#include <cstdint>
#include <functional>

namespace deferkv {

class ThreadPool;

struct ResidualEvent {
  int64_t n;                  // tokens in this forward pass
  const int32_t* positions;   // [n]
  const float* residual;      // [n x n_embd]
  int64_t n_embd;
  ThreadPool& pool;
};

using ResidualTap = std::function<void(const ResidualEvent&)>;

}  // namespace deferkv
