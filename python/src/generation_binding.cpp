// _Generation and _CompressedContext: the steps Python loops over, and their statistics.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "deferkv/embedding.h"
#include "generation.h"

namespace py = pybind11;

namespace deferkv::python {

py::dict kv_dict(const Session& session) {
  const KvStats stats = session.kv_stats();
  const KeptSet kept = kept_set(session);
  py::list entries, positions;  // [layer][kv head]
  for (int64_t l = 0; l < stats.n_layer; ++l) {
    py::list heads, head_positions;
    for (int64_t h = 0; h < stats.n_head_kv; ++h) {
      heads.append(stats.entries[static_cast<size_t>(l * stats.n_head_kv + h)]);
      head_positions.append(py::cast(kept.head(l, h)));
    }
    entries.append(heads);
    positions.append(head_positions);
  }
  const SessionTimings& t = session.timings();
  py::dict d;
  d["press"] = session.press() != nullptr ? session.press()->describe() : std::string("full");
  d["entries"] = entries;
  d["positions"] = positions;
  d["bytes"] = stats.bytes;
  d["peak_bytes"] = stats.peak_bytes;
  d["bytes_per_entry"] = stats.bytes_per_entry;
  d["capture_seconds"] = t.capture_seconds;
  d["eviction_seconds"] = t.eviction_seconds;
  return d;
}

py::dict timings_dict(const Session& session) {
  const SessionTimings& t = session.timings();
  py::dict d;
  d["prefill_tokens"] = t.prefill_tokens;
  d["prefill_seconds"] = t.prefill_seconds;
  d["decode_tokens"] = t.decode_tokens;
  d["decode_seconds"] = t.decode_seconds;
  d["capture_seconds"] = t.capture_seconds;
  d["eviction_seconds"] = t.eviction_seconds;
  d["lookahead_seconds"] = t.lookahead_seconds;
  return d;
}

void bind_generation(py::module_& m) {
  py::class_<Generation>(m, "_Generation")
      .def("step",
           [](Generation& self) -> py::object {
             // Ctrl-C between tokens: KeyboardInterrupt, the engine left between steps.
             if (PyErr_CheckSignals() != 0) throw py::error_already_set();
             std::optional<std::pair<int32_t, std::string>> next;
             {
               py::gil_scoped_release release;
               next = self.step();
             }
             if (!next) return py::none();
             return py::make_tuple(next->first, py::bytes(next->second));
           })
      .def("finish", [](Generation& self) { return py::bytes(self.finish()); })
      .def_property_readonly("tokens", &Generation::tokens)
      .def_property_readonly("stop_reason",
                             [](const Generation& self) -> py::object {
                               if (!self.stopped()) return py::none();
                               return py::str(stop_reason_name(self.stop_reason()));
                             })
      .def_property_readonly("seed", &Generation::seed)
      .def_property_readonly("prompt_tokens", &Generation::prompt_tokens)
      .def_property_readonly("kv", [](const Generation& self) { return kv_dict(self.session()); })
      .def_property_readonly("timings", [](const Generation& self) { return timings_dict(self.session()); });

  py::class_<CompressedContext, std::shared_ptr<CompressedContext>>(m, "_CompressedContext")
      .def_readonly("context_tokens", &CompressedContext::context_tokens)
      .def("restore", &restore_context)
      .def("save", &save_context)
      .def_property_readonly("shared", [](const CompressedContext& self) { return self.shared != nullptr; })
      .def_property_readonly("press",
                             [](const CompressedContext& self) -> std::string {
                               if (self.shared) return self.shared->press();
                               return self.session->press() ? self.session->press()->describe() : "full";
                             })
      .def_property_readonly("kv", [](const CompressedContext& self) { return kv_dict(*self.session); });
}

}  // namespace deferkv::python
