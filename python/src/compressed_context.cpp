#include <pybind11/pybind11.h>

#include "bindings.h"
#include "generation.h"

namespace py = pybind11;

namespace deferkv::python {

std::shared_ptr<CompressedContext> compress_context(std::shared_ptr<Session> session, const std::vector<int32_t>& context) {
  auto compressed = std::make_shared<CompressedContext>();
  {
    py::gil_scoped_release release;
    session->prefill(context);
    // The question is read as it is, as in kvpress's question-agnostic pipeline: the
    // press compressed the context only.
    session->set_press(nullptr);
    compressed->checkpoint = session->checkpoint();
  }
  compressed->session = std::move(session);
  compressed->context_tokens = static_cast<int64_t>(context.size());
  return compressed;
}

std::unique_ptr<Generation> answer_generation(CompressedContext& context, const std::vector<int32_t>& question,
                                              const SamplerParams& sampling, int64_t max_tokens) {
  py::gil_scoped_release release;
  context.session->rollback(*context.checkpoint);
  return std::make_unique<Generation>(context.session, question, sampling, max_tokens);
}

void restore_context(CompressedContext& context) {
  py::gil_scoped_release release;
  context.session->rollback(*context.checkpoint);
}

}  // namespace deferkv::python
