#include <pybind11/pybind11.h>

#include <filesystem>

#include "bindings.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "generation.h"

namespace py = pybind11;

namespace deferkv::python {

std::shared_ptr<CompressedContext> compress_context(std::shared_ptr<Session> session, const std::vector<int32_t>& context,
                                                    bool answers_once) {
  auto compressed = std::make_shared<CompressedContext>();
  {
    py::gil_scoped_release release;
    if (answers_once) {
      session->prefill(context);
      compressed->checkpoint = session->checkpoint();
    } else {
      compressed->shared = ::deferkv::CompressedContext::compress(*session, context);
    }
  }
  compressed->session = std::move(session);
  compressed->context_tokens = static_cast<int64_t>(context.size());
  compressed->answers_once = answers_once;
  return compressed;
}

std::shared_ptr<CompressedContext> load_context(const LoadedModel& m, const std::string& path) {
  if (!std::filesystem::exists(path)) throw FileNotFound("no compressed context '" + path + "'");
  auto loaded = std::make_shared<CompressedContext>();
  py::gil_scoped_release release;
  loaded->shared = ::deferkv::CompressedContext::load(path, *m.model);
  try {
    loaded->shared->check_made_with(loaded->shared->press(), m.cache_type_k, m.cache_type_v);
  } catch (const Error& e) {
    fail("cannot use '{}' with this Model: {}", path, e.what());
  }
  // A session holding the context, as one that compressed it would (kv statistics).
  loaded->session = std::make_shared<Session>(m.model, make_thread_pool(m.n_threads), session_options(m));
  start_session(*loaded->session, *loaded->shared);
  loaded->context_tokens = static_cast<int64_t>(loaded->shared->tokens().size());
  return loaded;
}

void save_context(const CompressedContext& context, const std::string& path) {
  if (!context.shared) {
    fail("press '{}' evicts after the prefill, so what it keeps depends on the question: its context answers once and "
         "cannot be saved; use a press that evicts once at the prefill's end",
         context.session->press()->describe());
  }
  py::gil_scoped_release release;
  context.shared->save(path);
}

std::unique_ptr<Generation> answer_generation(const LoadedModel& m, CompressedContext& context,
                                              const std::vector<int32_t>& question, const SamplerParams& sampling,
                                              int64_t max_tokens) {
  if (context.shared) {
    // A session of its own per answer: the context is shared, never changed.
    auto session = std::make_shared<Session>(m.model, make_thread_pool(m.n_threads), session_options(m));
    py::gil_scoped_release release;
    return std::make_unique<Generation>(std::move(session), *context.shared, question, sampling, max_tokens);
  }
  if (context.answers_once && context.answered) {
    fail("press '{}' evicts after the prefill, so what it keeps depends on the question: this compressed context "
         "has answered its question; compress the context again for another one",
         context.session->press()->describe());
  }
  py::gil_scoped_release release;
  context.session->rollback(*context.checkpoint);
  context.answered = true;
  return std::make_unique<Generation>(context.session, question, sampling, max_tokens, Generation::Feed::kQuestion);
}

void restore_context(CompressedContext& context) {
  if (!context.checkpoint) return;  // a shared context is never changed
  py::gil_scoped_release release;
  context.session->rollback(*context.checkpoint);
}

}  // namespace deferkv::python
