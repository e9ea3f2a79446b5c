#include <pybind11/pybind11.h>

#include "bindings.h"
#include "deferkv/error.h"
#include "generation.h"

namespace py = pybind11;

namespace deferkv::python {

std::shared_ptr<CompressedContext> compress_context(std::shared_ptr<Session> session, const std::vector<int32_t>& context,
                                                    bool answers_once) {
  auto compressed = std::make_shared<CompressedContext>();
  {
    py::gil_scoped_release release;
    session->prefill(context);
    compressed->checkpoint = session->checkpoint();
  }
  compressed->session = std::move(session);
  compressed->context_tokens = static_cast<int64_t>(context.size());
  compressed->answers_once = answers_once;
  return compressed;
}

std::unique_ptr<Generation> answer_generation(CompressedContext& context, const std::vector<int32_t>& question,
                                              const SamplerParams& sampling, int64_t max_tokens) {
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
  py::gil_scoped_release release;
  context.session->rollback(*context.checkpoint);
}

}  // namespace deferkv::python
