#pragma once
// The parts of the _deferkv extension, each binding one concern (see module.cpp).
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "deferkv/compressed_context.h"
#include "deferkv/sampler.h"
#include "deferkv/session.h"

namespace deferkv::python {

class Generation;

// A loaded model and what each of its sessions is built with.
struct LoadedModel {
  std::shared_ptr<const Model> model;
  int n_threads;
  int64_t n_ctx;
  std::string cache_type_k, cache_type_v;  // validated at load
};

// A press from its parameter string and budget; bad ones are ValueError ("full": none).
std::unique_ptr<Press> press_from(const std::string& spec, std::optional<int64_t> kv_budget, std::optional<double> kv_ratio);
// A model file (FileNotFoundError when it does not exist), loaded with the GIL released.
std::shared_ptr<const Model> load_model(const std::string& path);
// A session of `m` with its own thread pool, the press set. n_ctx 0: the model's.
std::unique_ptr<Session> new_session(const LoadedModel& m, const SessionOptions& options, const std::string& press,
                                     std::optional<int64_t> kv_budget, std::optional<double> kv_ratio, const std::optional<std::string>& draft_model);
SessionOptions session_options(const LoadedModel& m);

// Raised as Python's FileNotFoundError.
struct FileNotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A context prefilled once with a press (question-agnostic compression). Two kinds:
//  - shared (a press that evicts once, at the prefill's end, or deferkv, whose context is
//    deferred: each answer resumes its press and evicts at its own step d): the library's
//    deferkv::CompressedContext; each answer is a new session started from it (no press), so
//    answers may run side by side, and it saves and loads;
//  - answers once (another press that evicts after the prefill: press_evicts_after_prefill): its
//    state, not part of a checkpoint, is spent by the first answer; the session keeps the
//    press and a checkpoint, and the answer reads the question on it.
// `session` holds the compressed cache either way (kv statistics).
struct CompressedContext {
  std::shared_ptr<Session> session;
  std::shared_ptr<const ::deferkv::CompressedContext> shared;  // null when it answers once
  std::shared_ptr<const SessionCheckpoint> checkpoint;          // when it answers once
  int64_t context_tokens = 0;
  bool answers_once = false;
  bool answered = false;
};
std::shared_ptr<CompressedContext> compress_context(std::shared_ptr<Session> session, const std::vector<int32_t>& context,
                                                    bool answers_once);
// A context saved by save_context, for sessions of `m` (its model and cache types).
std::shared_ptr<CompressedContext> load_context(const LoadedModel& m, const std::string& path);
void save_context(const CompressedContext& context, const std::string& path);
std::unique_ptr<Generation> answer_generation(const LoadedModel& m, CompressedContext& context,
                                              const std::vector<int32_t>& question, const SamplerParams& sampling,
                                              int64_t max_tokens);
// Puts the context back to its compressed state (after an answer).
void restore_context(CompressedContext& context);

// The KV cache and timings of a session, as Python dicts.
pybind11::dict kv_dict(const Session& session);
pybind11::dict timings_dict(const Session& session);

void bind_model(pybind11::module_& m);
void bind_generation(pybind11::module_& m);
void bind_catalogue(pybind11::module_& m);
void bind_session(pybind11::module_& m);
void bind_eval(pybind11::module_& m);
void bind_scorer(pybind11::module_& m);

}  // namespace deferkv::python
