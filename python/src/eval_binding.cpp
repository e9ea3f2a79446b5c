// _deferkv.eval_run: deferkv.eval.run's engine side, the library's run_eval with the GIL
// released, and Ctrl-C stopping it between two samples (the reports of what is done are
// written, then KeyboardInterrupt is raised).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "deferkv/eval_run.h"

namespace py = pybind11;

namespace deferkv::python {
namespace {

py::dict run(const eval::EvalRequest& request, bool progress) {
  bool interrupted_by_signal = false;
  // Runs on the engine's thread without the GIL: takes it to look for Ctrl-C.
  auto stop_requested = [&interrupted_by_signal] {
    py::gil_scoped_acquire acquire;
    if (PyErr_CheckSignals() != 0) interrupted_by_signal = true;
    return interrupted_by_signal;
  };
  eval::EvalOutcome outcome;
  {
    py::gil_scoped_release release;
    outcome = eval::run_eval(request, progress ? stderr : nullptr, stop_requested);
  }
  if (interrupted_by_signal) throw py::error_already_set();  // the KeyboardInterrupt PyErr_CheckSignals set
  py::dict d;
  d["dir"] = outcome.dir;
  d["samples_run"] = outcome.samples_run;
  d["failed_rows"] = outcome.failed_rows;
  d["seconds"] = outcome.seconds;
  d["tables"] = outcome.tables;
  return d;
}

}  // namespace

void bind_eval(py::module_& m) {
  py::class_<eval::EvalRequest>(m, "_EvalRequest")
      .def(py::init<>())
      .def_readwrite("model", &eval::EvalRequest::model)
      .def_readwrite("draft_model", &eval::EvalRequest::draft_model)
      .def_readwrite("bench", &eval::EvalRequest::bench)
      .def_readwrite("tasks", &eval::EvalRequest::tasks)
      .def_readwrite("lengths", &eval::EvalRequest::lengths)
      .def_readwrite("depths", &eval::EvalRequest::depths)
      .def_readwrite("presses", &eval::EvalRequest::presses)
      .def_readwrite("budgets", &eval::EvalRequest::budgets)
      .def_readwrite("ratios", &eval::EvalRequest::ratios)
      .def_readwrite("samples", &eval::EvalRequest::samples)
      .def_readwrite("seed", &eval::EvalRequest::seed)
      .def_readwrite("word_split", &eval::EvalRequest::word_split)
      .def_readwrite("threads", &eval::EvalRequest::threads)
      .def_readwrite("n_batch", &eval::EvalRequest::n_batch)
      .def_readwrite("cache_type_k", &eval::EvalRequest::cache_type_k)
      .def_readwrite("cache_type_v", &eval::EvalRequest::cache_type_v)
      .def_readwrite("question_agnostic", &eval::EvalRequest::question_agnostic)
      .def_readwrite("questions_per_context", &eval::EvalRequest::questions_per_context)
      .def_readwrite("context_mode", &eval::EvalRequest::context_mode)
      .def_readwrite("output", &eval::EvalRequest::output)
      .def_readwrite("name", &eval::EvalRequest::name)
      .def_readwrite("shard", &eval::EvalRequest::shard)
      .def_readwrite("chat", &eval::EvalRequest::chat)
      .def_readwrite("chat_template", &eval::EvalRequest::chat_template)
      .def_readwrite("data_dir", &eval::EvalRequest::data_dir)
      .def_readwrite("squad", &eval::EvalRequest::squad)
      .def_readwrite("hotpotqa", &eval::EvalRequest::hotpotqa)
      .def_readwrite("longbench_dir", &eval::EvalRequest::longbench_dir)
      .def_readwrite("max_length", &eval::EvalRequest::max_length)
      .def("set_sampling", [](eval::EvalRequest& r, double temperature, int top_k, double top_p, double min_p) {
        r.sampling.temperature = static_cast<float>(temperature);
        r.sampling.top_k = top_k;
        r.sampling.top_p = static_cast<float>(top_p);
        r.sampling.min_p = static_cast<float>(min_p);
      });
  m.def("eval_run", &run, py::arg("request"), py::arg("progress"));
}

}  // namespace deferkv::python
