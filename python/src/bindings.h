#pragma once
// The parts of the _deferkv extension, each binding one concern (see module.cpp).
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "deferkv/sampler.h"
#include "deferkv/session.h"

namespace deferkv::python {

class Generation;

// Raised as Python's FileNotFoundError.
struct FileNotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A context prefilled once with a press (question-agnostic compression), then kept as a
// checkpoint: each answer starts from it and puts it back. The press stays set: each
// question is read as Session::prefill_question reads it (deferkv::prefill_prompt's path).
struct CompressedContext {
  std::shared_ptr<Session> session;
  std::shared_ptr<const SessionCheckpoint> checkpoint;
  int64_t context_tokens = 0;
  // The press evicts after the prefill (press_evicts_after_prefill): its state, not part of
  // the checkpoint, is spent by the first answer, so the context answers once.
  bool answers_once = false;
  bool answered = false;
};
std::shared_ptr<CompressedContext> compress_context(std::shared_ptr<Session> session, const std::vector<int32_t>& context,
                                                    bool answers_once);
std::unique_ptr<Generation> answer_generation(CompressedContext& context, const std::vector<int32_t>& question,
                                              const SamplerParams& sampling, int64_t max_tokens);
// Puts the context back to its compressed state (after an answer).
void restore_context(CompressedContext& context);

// The KV cache and timings of a session, as Python dicts.
pybind11::dict kv_dict(const Session& session);
pybind11::dict timings_dict(const Session& session);

void bind_model(pybind11::module_& m);
void bind_generation(pybind11::module_& m);
void bind_catalogue(pybind11::module_& m);

}  // namespace deferkv::python
