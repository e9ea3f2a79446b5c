#pragma once
// LookaheadKV's trained parts as a GGUF file: the lookahead token embeddings and the LoRA
// deltas of chosen projections of every layer, applied at the lookahead rows only. The
// format (keys, tensor names, shapes, orientation) is specified in
// docs/lookaheadkv_weights.md.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deferkv/press.h"
#include "observe/lookahead_rows.h"

namespace deferkv {

struct LookaheadWeights {
  // The model they were trained for (checked against the model they are attached to).
  std::string base_architecture;
  int64_t base_n_embd = 0;
  int64_t base_n_layer = 0;
  int64_t lora_rank = 0;
  float lora_alpha = 0;
  std::vector<Projection> targets;  // projections with a delta in every layer
  // The embeddings, and per layer a delta (scale alpha / rank) for each target; the
  // other projections' deltas are empty.
  LookaheadRows rows;
};

// "q", "k", "v", "o", "gate", "up", "down"; and back (nullopt for another name).
const char* projection_name(Projection p);
std::optional<Projection> projection_from_name(const std::string& name);

// The input and output widths of projection p in a model of this shape.
std::pair<int64_t, int64_t> projection_widths(Projection p, const PressModelShape& shape);

// Reads and checks a weights file; every problem is an error naming the file and the
// key or tensor at fault.
LookaheadWeights load_lookahead_weights(const std::string& path);

// Writes a weights file (to a temporary name, then renamed), tensors as float32. Fails,
// naming the inconsistency, when the weights do not describe a valid file.
void save_lookahead_weights(const std::string& path, const LookaheadWeights& weights);

// Fails, naming the first mismatch, unless the weights fit a model of this shape.
void check_lookahead_weights_fit(const LookaheadWeights& weights, const PressModelShape& shape,
                                 const std::string& path);

}  // namespace deferkv
