// A press whose scorer is written in Python (deferkv.Scorer, docs/python.md "A press written
// in Python"): a ScoredPress whose score() calls the Python object's score(layer), so it
// takes every allocation, selection and trigger the C++ scorers take. The scorer is added to
// the press registry under its name (add_press_method), so a spec names it as it names a
// built-in method: generate, compress, Session and deferkv.eval.run all build it by
// make_press.
//
// The engine calls score() with the GIL released, from the thread running the forward pass
// (a Python thread's, or the one an eval runs on): score() takes the GIL. A Python exception
// raised there travels through the engine as a C++ exception and comes back to Python, as
// itself, from the call that ran the engine; the Session takes back the prompt or step that
// was under way (Session::feed_prompt, abandon_decode).
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "kv/kv_cache.h"
#include "press/core/scored_press.h"
#include "press/registry.h"

namespace py = pybind11;

namespace deferkv::python {
namespace {

// What a Python scorer declares it observes (its class attributes or constructor keywords).
struct ScorerCapture {
  int64_t window = 0;            // the last `window` prompt queries
  int64_t protected_window = 0;  // the newest entries always kept (SnapKV's window)
  bool all_prompt_queries = false;
  int64_t decode_steps = 0;
  bool all_decode_queries = false;
  bool trigger_queries = false;
  std::string gqa = "mean";  // over a KV head's query heads: mean | max | sum
};

// The declaration as the engine's CaptureConfig. Kept to this one function: CaptureConfig is
// the part of the scorer protocol most likely to change shape.
CaptureConfig capture_config(const ScorerCapture& c) {
  using Queries = Observation::Queries;
  CaptureConfig config;
  if (c.window > 0) config.observations.push_back(Observation::prompt_window(c.window));
  if (c.all_prompt_queries) config.observations.push_back(Observation::every(Queries::kPromptAll));
  if (c.decode_steps > 0) config.observations.push_back(Observation::decode_steps(c.decode_steps));
  if (c.all_decode_queries) config.observations.push_back(Observation::every(Queries::kDecodeAll));
  if (c.trigger_queries) config.observations.push_back(Observation::every(Queries::kTriggerStep));
  config.group = c.gqa == "max" ? GroupReduction::kMax : c.gqa == "sum" ? GroupReduction::kSum : GroupReduction::kMean;
  return config;
}

// The declaration as the method's own parameters: they show in describe() (so in an eval's
// config.json, a row's identity), and a spec may repeat them but not change them.
std::vector<std::pair<std::string, std::string>> capture_fields(const ScorerCapture& c) {
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  return {{"window", std::to_string(c.window)},
          {"protected_window", std::to_string(c.protected_window)},
          {"all_prompt_queries", flag(c.all_prompt_queries)},
          {"decode_steps", std::to_string(c.decode_steps)},
          {"all_decode_queries", flag(c.all_decode_queries)},
          {"trigger_queries", flag(c.trigger_queries)},
          {"gqa", c.gqa}};
}

void check_capture(const ScorerCapture& c, const std::string& name) {
  for (auto [field, value] : {std::pair{"window", c.window}, {"protected_window", c.protected_window},
                              {"decode_steps", c.decode_steps}}) {
    if (value < 0 || value > (1 << 20)) {
      throw py::value_error(fmt::format("scorer '{}': {} must be 0 to 2^20, got {}", name, field, value));
    }
  }
  if (c.gqa != "mean" && c.gqa != "max" && c.gqa != "sum") {
    throw py::value_error(fmt::format("scorer '{}': gqa must be mean, max or sum, got '{}'", name, c.gqa));
  }
}

// A Python object the engine holds: freed with the GIL, whichever thread drops it last (an
// eval's sessions end on its thread, without the GIL).
struct HeldObject {
  py::object object;
  explicit HeldObject(py::object o) : object(std::move(o)) {}
  HeldObject(const HeldObject&) = delete;
  HeldObject& operator=(const HeldObject&) = delete;
  ~HeldObject() {
    if (!Py_IsInitialized()) {
      object.release();  // the interpreter is gone: nothing to free it with
      return;
    }
    py::gil_scoped_acquire gil;
    object = py::object();
  }
};

// The `layer` argument of Scorer.score(): a view of the engine's LayerEviction, valid during
// that call only (the engine frees or reuses what it points to right after). Every array it
// gives is a copy, the caller's to keep.
struct ScorerLayer {
  const LayerEviction* eviction = nullptr;

  const LayerEviction& get() const {
    if (eviction == nullptr) {
      throw py::value_error("this Layer is only readable inside the score() call it was given to; copy what you need");
    }
    return *eviction;
  }
  int64_t head(int64_t g) const {
    const LayerEviction& l = get();
    if (g < 0 || g >= l.n_head_kv()) {
      throw py::index_error(fmt::format("kv_head {} is out of range: layer {} has {} KV heads (0..{})", g, l.layer,
                                        l.n_head_kv(), l.n_head_kv() - 1));
    }
    return g;
  }
};

py::array_t<float> float_array(const std::vector<float>& v) {
  py::array_t<float> out(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(float));
  return out;
}

py::list head_arrays(const std::vector<std::vector<float>>& heads) {
  py::list out;
  for (const auto& h : heads) out.append(float_array(h));
  return out;
}

py::array_t<float> rows_array(const ScorerLayer& self, int64_t g, KvPart part) {
  const LayerEviction& l = self.get();
  const KvCache& kv = l.cache;
  self.head(g);
  const KvRows rows = part == KvPart::kKeys ? kv.keys(l.layer, g) : kv.values(l.layer, g);
  const int64_t n = kv.length(l.layer, g);
  py::array_t<float> out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(kv.head_dim())});
  if (n > 0) rows.to_f32(0, n, out.mutable_data());
  return out;
}

// score()'s answer as the engine takes it: one 1-D array of numbers per KV head, at least
// C_g of them, none NaN among the first C_g (the ones selection reads). Anything else is a
// ValueError naming the head and the sizes.
std::vector<std::vector<float>> checked_scores(const py::object& result, const LayerEviction& layer,
                                               const std::string& name) {
  const std::string where = fmt::format("scorer '{}', layer {}", name, layer.layer);
  if (!py::isinstance<py::sequence>(result) || py::isinstance<py::str>(result)) {
    throw py::value_error(fmt::format("{}: score() returned {}; it returns one array of scores per KV head ({})",
                                      where, std::string(py::str(py::type::of(result).attr("__name__"))),
                                      layer.n_head_kv()));
  }
  const auto heads = py::reinterpret_borrow<py::sequence>(result);
  if (static_cast<int64_t>(heads.size()) != layer.n_head_kv()) {
    throw py::value_error(fmt::format("{}: score() returned {} arrays; the layer has {} KV heads (one array each)",
                                      where, heads.size(), layer.n_head_kv()));
  }
  std::vector<std::vector<float>> scores(heads.size());
  for (int64_t g = 0; g < layer.n_head_kv(); ++g) {
    using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
    const FloatArray a = FloatArray::ensure(heads[static_cast<size_t>(g)]);
    const int64_t c = layer.candidates[g];
    if (!a) throw py::value_error(fmt::format("{}, KV head {}: its scores are not an array of numbers", where, g));
    if (a.ndim() != 1) {
      throw py::value_error(fmt::format("{}, KV head {}: a {}-D array; the scores are 1-D, one per candidate ({})",
                                        where, g, a.ndim(), c));
    }
    if (a.size() < c) {
      throw py::value_error(fmt::format("{}, KV head {}: {} scores for {} candidates (at least one per candidate)",
                                        where, g, a.size(), c));
    }
    const float* v = a.data();
    for (int64_t j = 0; j < c; ++j) {
      if (std::isnan(v[j])) throw py::value_error(fmt::format("{}, KV head {}: score {} is NaN", where, g, j));
    }
    scores[static_cast<size_t>(g)].assign(v, v + a.size());
  }
  return scores;
}

class PythonScorerPress final : public ScoredPress {
 public:
  PythonScorerPress(const PressParams& params, const KvBudget& budget, ScoredParts parts,
                    std::shared_ptr<const HeldObject> scorer)
      : ScoredPress(params, budget, std::move(parts)), scorer_(std::move(scorer)), name_(params.name()) {}

 protected:
  std::vector<std::vector<float>> score(const LayerEviction& layer) override {
    py::gil_scoped_acquire gil;
    auto view = std::make_shared<ScorerLayer>();
    view->eviction = &layer;
    struct Expire {  // on every way out, exceptions included
      ScorerLayer& view;
      ~Expire() { view.eviction = nullptr; }
    } expire{*view};
    py::object result;
    try {
      result = scorer_->object.attr("score")(view);
    } catch (py::error_already_set& e) {
      // The scorer's own exception goes on as it is (its type and traceback); Python 3.11's
      // notes say where the engine called it.
      if (py::hasattr(e.value(), "add_note")) {
        const char* when =
            layer.next_position > layer.prompt_end ? "a decode step's eviction" : "the prompt's eviction";
        e.value().attr("add_note")(fmt::format("raised in {}.score() at layer {} ({})", name_, layer.layer, when));
      }
      throw;
    }
    return checked_scores(result, layer, name_);
  }

 private:
  std::shared_ptr<const HeldObject> scorer_;
  std::string name_;
};

// The press of a scorer added under p.name(): the shared parts from `p`, the capture the
// scorer declared (a spec may repeat it, not change it: the Python object reads its own).
std::unique_ptr<Press> scorer_press(const PressParams& p, const KvBudget& b, const ScorerCapture& capture,
                                    const std::shared_ptr<const HeldObject>& scorer) {
  for (const auto& [key, value] : capture_fields(capture)) {
    if (p.get_string(key) != value) {
      fail("press '{}': {} is declared by the scorer ({}), not a parameter to change ({}); make a scorer that "
           "declares it", p.name(), key, value, p.get_string(key));
    }
  }
  ScoredParts parts = read_scored_parts(p);
  parts.capture = capture_config(capture);
  parts.window = capture.protected_window;
  return std::make_unique<PythonScorerPress>(p, b, std::move(parts), scorer);
}

// Adds `scorer` to the press registry as the method `name` (replacing a scorer added under
// that name before), with the shared parameters of every scorer method.
void add_scorer(py::object scorer, const std::string& name, const ScorerCapture& capture) {
  if (!py::hasattr(scorer, "score") || !PyCallable_Check(scorer.attr("score").ptr())) {
    throw py::type_error(fmt::format("scorer '{}' has no score(layer) method", name));
  }
  check_capture(capture, name);
  std::vector<PressParameter> own;
  for (const auto& [key, value] : capture_fields(capture)) own.push_back({key, value, "declared by the scorer"});
  const std::string summary =
      fmt::format("a scorer written in Python ({})", std::string(py::str(py::type::of(scorer).attr("__qualname__"))));
  auto held = std::make_shared<const HeldObject>(std::move(scorer));
  PressMethod method{{name, summary, "", with_shared_parameters(std::move(own))},
                     [held, capture](const PressParams& p, const KvBudget& b) {
                       return scorer_press(p, b, capture, held);
                     },
                     scored_press_role};
  try {
    add_press_method(std::move(method));
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

void bind_scorer(py::module_& m) {
  py::class_<ScorerCapture>(m, "_ScorerCapture")
      .def(py::init<>())
      .def_readwrite("window", &ScorerCapture::window)
      .def_readwrite("protected_window", &ScorerCapture::protected_window)
      .def_readwrite("all_prompt_queries", &ScorerCapture::all_prompt_queries)
      .def_readwrite("decode_steps", &ScorerCapture::decode_steps)
      .def_readwrite("all_decode_queries", &ScorerCapture::all_decode_queries)
      .def_readwrite("trigger_queries", &ScorerCapture::trigger_queries)
      .def_readwrite("gqa", &ScorerCapture::gqa);
  m.def("add_scorer", &add_scorer, py::arg("scorer"), py::arg("name"), py::arg("capture"));
  // A spec's keys and values checked when a Press is made, not first at its use (a budget
  // large enough for any protected window: the budget is the call's).
  m.def("check_press", [](const std::string& spec) {
    try {
      make_press(spec, KvBudget::per_head(int64_t{1} << 24));
    } catch (const Error& e) {
      throw py::value_error(e.what());
    }
  });
  // The registry holds Python objects: freed at exit while the interpreter still runs.
  py::module_::import("atexit").attr("register")(py::cpp_function([] { clear_added_press_methods(); }));

  py::class_<ScorerLayer, std::shared_ptr<ScorerLayer>>(m, "Layer")
      .def_property_readonly("layer", [](const ScorerLayer& s) { return s.get().layer; })
      .def_property_readonly("n_layer", [](const ScorerLayer& s) { return s.get().n_layer; })
      .def_property_readonly("prompt_end", [](const ScorerLayer& s) { return s.get().prompt_end; })
      .def_property_readonly("next_position", [](const ScorerLayer& s) { return s.get().next_position; })
      .def_property_readonly("budget", [](const ScorerLayer& s) { return s.get().budget; })
      .def_property_readonly("window", [](const ScorerLayer& s) { return s.get().window; })
      .def_property_readonly("n_head_kv", [](const ScorerLayer& s) { return s.get().n_head_kv(); })
      .def_property_readonly("candidates", [](const ScorerLayer& s) { return s.get().candidates; })
      .def_property_readonly("prompt_attention",
                             [](const ScorerLayer& s) { return head_arrays(s.get().prompt_attention); })
      .def_property_readonly("decode_attention",
                             [](const ScorerLayer& s) {
                               py::list steps;
                               for (const auto& step : s.get().decode_attention) steps.append(head_arrays(step));
                               return steps;
                             })
      .def("positions",
           [](const ScorerLayer& s, int64_t g) {
             const LayerEviction& l = s.get();
             const int32_t* p = l.cache.positions(l.layer, s.head(g));
             const int64_t n = l.cache.length(l.layer, g);
             py::array_t<int32_t> out(static_cast<py::ssize_t>(n));
             if (n > 0) std::memcpy(out.mutable_data(), p, static_cast<size_t>(n) * sizeof(int32_t));
             return out;
           })
      .def("keys", [](const ScorerLayer& s, int64_t g) { return rows_array(s, g, KvPart::kKeys); })
      .def("values", [](const ScorerLayer& s, int64_t g) { return rows_array(s, g, KvPart::kValues); })
      .def("__repr__", [](const ScorerLayer& s) {
        if (s.eviction == nullptr) return std::string("<deferkv Layer, expired>");
        const LayerEviction& l = *s.eviction;
        return fmt::format("<deferkv Layer {} of {}: prompt_end {}, next_position {}, budget {}, window {}, "
                           "{} KV heads>",
                           l.layer, l.n_layer, l.prompt_end, l.next_position, l.budget, l.window, l.n_head_kv());
      });
}

}  // namespace deferkv::python
