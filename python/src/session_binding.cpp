// _Session: the research level of the module, a Session driven call by call from Python,
// with its logits and its KV cache per (layer, KV head) as NumPy arrays.
#include <cstring>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"

namespace py = pybind11;

namespace deferkv::python {
namespace {

// The Python Session owns its engine Session; checkpoints remember whose they are.
struct PySession {
  std::shared_ptr<LoadedModel> model;
  std::unique_ptr<Session> session;
};

struct PyCheckpoint {
  const PySession* owner;
  std::shared_ptr<const SessionCheckpoint> checkpoint;
  int64_t n_past;
};

std::unique_ptr<PySession> open_session(std::shared_ptr<LoadedModel> model, int64_t n_ctx, int64_t n_batch,
                                        bool all_logits, const std::string& press, std::optional<int64_t> kv_budget, std::optional<double> kv_ratio,
                                        const std::optional<std::string>& draft_model,
                                        const std::optional<std::string>& cache_type_k,
                                        const std::optional<std::string>& cache_type_v) {
  if (n_ctx < 0) throw py::value_error("n_ctx must be 0 (the model's) or positive, got " + std::to_string(n_ctx));
  if (n_batch < 1) throw py::value_error("n_batch must be at least 1, got " + std::to_string(n_batch));
  SessionOptions options = session_options(*model);
  if (n_ctx > 0) options.n_ctx = n_ctx;
  options.n_batch = n_batch;
  options.all_logits = all_logits;
  for (auto [given, field] : {std::pair{&cache_type_k, &options.cache_type_k}, {&cache_type_v, &options.cache_type_v}}) {
    if (!*given) continue;
    try {
      check_kv_cache_type_name(**given);
    } catch (const Error& e) {
      throw py::value_error(e.what());
    }
    *field = **given;
  }
  auto s = std::make_unique<PySession>();
  s->session = new_session(*model, options, press, kv_budget, kv_ratio, draft_model);
  s->model = std::move(model);
  return s;
}

// The logits of the last call: [n_vocab], or [n_tokens, n_vocab] of the last prefill with
// all_logits. A copy (the engine reuses its buffer at the next call, so a view would
// change under the caller or outlive it); n_vocab floats cost microseconds.
py::array_t<float> logits_array(const PySession& self) {
  const Session& s = *self.session;
  const auto n_vocab = static_cast<py::ssize_t>(s.model().config().n_vocab);
  const std::vector<float>& logits = s.logits();
  const auto rows = static_cast<py::ssize_t>(logits.size()) / n_vocab;
  py::array_t<float> out = rows == 1 ? py::array_t<float>(n_vocab) : py::array_t<float>({rows, n_vocab});
  std::memcpy(out.mutable_data(), logits.data(), logits.size() * sizeof(float));
  return out;
}

// The library's range check (its only error here) as IndexError.
template <typename Read>
auto read_head(Read&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw py::index_error(e.what());
  }
}

py::array_t<int32_t> positions_array(const PySession& self, int64_t layer, int64_t kv_head) {
  const std::vector<int32_t> positions = read_head([&] { return kv_positions(*self.session, layer, kv_head); });
  py::array_t<int32_t> out(static_cast<py::ssize_t>(positions.size()));
  if (!positions.empty()) std::memcpy(out.mutable_data(), positions.data(), positions.size() * sizeof(int32_t));
  return out;
}

py::array_t<float> rows_array(const PySession& self, int64_t layer, int64_t kv_head, KvPart part) {
  const std::vector<float> rows = read_head([&] { return kv_rows(*self.session, layer, kv_head, part); });
  const auto head_dim = static_cast<py::ssize_t>(self.session->model().config().head_dim);
  py::array_t<float> out({static_cast<py::ssize_t>(rows.size()) / head_dim, head_dim});
  if (!rows.empty()) std::memcpy(out.mutable_data(), rows.data(), rows.size() * sizeof(float));
  return out;
}

py::object last_eviction(const PySession& self) {
  const auto& eviction = self.session->last_eviction();
  if (!eviction) return py::none();
  py::dict d;
  d["decode_step"] = eviction->decode_step;
  d["n_past"] = eviction->n_past;
  d["layer_entries"] = eviction->layer_entries;
  d["layer_bytes"] = eviction->layer_bytes;
  d["bytes"] = eviction->bytes;
  return d;
}

// Token ids as the engine takes them; ValueError for one outside the vocabulary.
std::vector<int32_t> vocabulary_ids(const PySession& self, const std::vector<int64_t>& ids) {
  const int64_t n_vocab = self.session->model().config().n_vocab;
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= n_vocab) {
      throw py::value_error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                            std::to_string(n_vocab - 1) + ")");
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

}  // namespace

void bind_session(py::module_& m) {
  py::class_<PyCheckpoint>(m, "_Checkpoint").def_readonly("n_past", &PyCheckpoint::n_past);

  py::class_<PySession>(m, "_Session")
      .def(py::init(&open_session), py::arg("model"), py::arg("n_ctx"), py::arg("n_batch"), py::arg("all_logits"),
           py::arg("press"), py::arg("kv_budget"), py::arg("kv_ratio"), py::arg("draft_model"),
           py::arg("cache_type_k"), py::arg("cache_type_v"))
      .def("prefill",
           [](PySession& self, const std::vector<int64_t>& ids) {
             const std::vector<int32_t> tokens = vocabulary_ids(self, ids);
             py::gil_scoped_release release;
             self.session->prefill(tokens);
           })
      .def("decode",
           [](PySession& self, int64_t id) {
             const int32_t token = vocabulary_ids(self, {id}).front();
             py::gil_scoped_release release;
             self.session->decode(token);
           })
      .def("truncate", [](PySession& self, int64_t n_past) { self.session->truncate(n_past); })
      .def("checkpoint",
           [](const PySession& self) {
             py::gil_scoped_release release;
             return PyCheckpoint{&self, self.session->checkpoint(), self.session->n_past()};
           })
      .def("rollback",
           [](PySession& self, const PyCheckpoint& checkpoint) {
             if (checkpoint.owner != &self) throw py::value_error("the checkpoint belongs to another Session");
             py::gil_scoped_release release;
             self.session->rollback(*checkpoint.checkpoint);
           })
      .def("set_press",
           [](PySession& self, const std::string& press, std::optional<int64_t> kv_budget, std::optional<double> kv_ratio) {
             self.session->set_press(press_from(press, kv_budget, kv_ratio));
           })
      .def_property_readonly("press",
                             [](const PySession& self) {
                               const Press* p = self.session->press();
                               return p != nullptr ? p->describe() : std::string("full");
                             })
      .def_property_readonly("logits", &logits_array)
      .def_property_readonly("n_past", [](const PySession& self) { return self.session->n_past(); })
      .def_property_readonly("n_ctx", [](const PySession& self) { return self.session->n_ctx(); })
      .def_property_readonly("kv", [](const PySession& self) { return kv_dict(*self.session); })
      .def_property_readonly("timings", [](const PySession& self) { return timings_dict(*self.session); })
      .def_property_readonly("last_eviction", &last_eviction)
      .def("kv_positions", &positions_array)
      .def("kv_keys", [](const PySession& self, int64_t l, int64_t h) { return rows_array(self, l, h, KvPart::kKeys); })
      .def("kv_values",
           [](const PySession& self, int64_t l, int64_t h) { return rows_array(self, l, h, KvPart::kValues); });
}

}  // namespace deferkv::python
