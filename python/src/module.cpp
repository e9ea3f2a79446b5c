// The _deferkv extension: the engine's C++ API for python/deferkv/__init__.py, which
// gives it its Python shape (keyword arguments, results, streaming, stop strings).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "deferkv/error.h"
#include "deferkv/generation_params.h"

namespace py = pybind11;

PYBIND11_MODULE(_deferkv, m) {
  m.doc() = "deferkv's engine (use the deferkv package, not this module)";
  // deferkv::Error becomes deferkv.Error (a RuntimeError) with the engine's message.
  static py::exception<deferkv::Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const deferkv::ParameterError& e) {
      // A generation parameter out of range (generation_params.h, the server's checks too).
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const deferkv::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    } catch (const deferkv::python::FileNotFound& e) {
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
    }
  });
  deferkv::python::bind_model(m);
  deferkv::python::bind_generation(m);
  deferkv::python::bind_catalogue(m);
  deferkv::python::bind_session(m);
  deferkv::python::bind_eval(m);
  deferkv::python::bind_scorer(m);
}
