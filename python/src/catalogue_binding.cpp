// deferkv.presses() and deferkv.score(): the press catalogue and the official scorers,
// as plain Python data.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "deferkv/error.h"
#include "deferkv/press.h"
#include "deferkv/score_predictions.h"

namespace py = pybind11;

namespace deferkv::python {
namespace {

py::list presses() {
  py::list out;
  for (const PressInfo& info : press_catalogue()) {
    py::list parameters;
    for (const PressParameter& p : info.parameters) {
      py::dict d;
      d["name"] = p.name;
      d["default"] = p.default_value;
      d["help"] = p.help;
      parameters.append(d);
    }
    py::dict d;
    d["name"] = info.name;
    d["summary"] = info.summary;
    d["paper"] = info.paper;
    d["uses_budget"] = info.uses_budget;
    d["reads"] = press_reads_name(info.reads);
    d["parameters"] = parameters;
    out.append(d);
  }
  return out;
}

py::dict score(const std::string& jsonl, const std::optional<std::string>& benchmark) {
  std::optional<eval::Benchmark> which;
  if (benchmark) {
    try {
      which = eval::benchmark_from_name(*benchmark);
    } catch (const Error& e) {
      throw py::value_error(e.what());
    }
  }
  eval::PredictionScores scores;
  {
    py::gil_scoped_release release;
    scores = eval::score_predictions(jsonl, "rows", which);
  }
  py::list rows;
  for (const eval::MethodScores& method : scores.rows) {
    py::list groups;
    for (const eval::GroupScore& g : method.groups) {
      py::dict d;
      d["name"] = g.name;
      d["samples"] = g.samples;
      d["score"] = g.score;
      groups.append(d);
    }
    py::dict row;
    row["label"] = method.label;
    row["length"] = method.length ? py::object(py::int_(*method.length)) : py::object(py::none());
    row["average"] = method.average;
    row["groups"] = groups;
    rows.append(row);
  }
  py::dict out;
  out["benchmark"] = std::string(eval::benchmark_name(scores.benchmark));
  out["rows"] = rows;
  return out;
}

}  // namespace

void bind_catalogue(py::module_& m) {
  m.def("presses", &presses);
  m.def("score", &score, py::arg("jsonl"), py::arg("benchmark") = py::none());
}

}  // namespace deferkv::python
