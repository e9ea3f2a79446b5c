// deferkv.Model's engine side: loading, tokens, and building sessions and generations.
#include <filesystem>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "deferkv/chat_template.h"
#include "deferkv/embedding.h"
#include "deferkv/error.h"
#include "deferkv/generation_params.h"
#include "deferkv/press.h"
#include "deferkv/tokenizer.h"
#include "generation.h"

namespace py = pybind11;

namespace deferkv::python {

std::shared_ptr<const Model> load_model(const std::string& path) {
  try {
    py::gil_scoped_release release;
    return Model::load(path);
  } catch (const Error& e) {
    // A missing file is FileNotFoundError, with the engine's message.
    if (!std::filesystem::exists(path)) throw FileNotFound(e.what());
    throw;
  }
}

std::unique_ptr<Press> press_from(const std::string& spec, std::optional<int64_t> kv_budget,
                                  std::optional<double> kv_ratio) {
  check_budget(spec, kv_budget, kv_ratio);  // a ParameterError: ValueError
  if (spec == "full") return nullptr;
  try {
    const KvBudget budget = kv_ratio ? KvBudget::ratio(*kv_ratio)
                            : kv_budget ? KvBudget::per_head(*kv_budget)
                                        : KvBudget();
    return make_press(spec, budget);
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

SessionOptions session_options(const LoadedModel& m) {
  SessionOptions options;
  options.n_ctx = m.n_ctx;
  options.cache_type_k = m.cache_type_k;
  options.cache_type_v = m.cache_type_v;
  return options;
}

std::unique_ptr<Session> new_session(const LoadedModel& m, const SessionOptions& options, const std::string& press,
                                     std::optional<int64_t> kv_budget, std::optional<double> kv_ratio, const std::optional<std::string>& draft_model) {
  std::unique_ptr<Press> p = press_from(press, kv_budget, kv_ratio);
  std::shared_ptr<const Model> draft = draft_model ? load_model(*draft_model) : nullptr;
  // A pool per session: generations in several Python threads run side by side.
  auto session = std::make_unique<Session>(m.model, make_thread_pool(m.n_threads), options);
  session->set_press(std::move(p));
  if (draft) session->set_draft_model(std::move(draft));
  return session;
}

namespace {

std::shared_ptr<LoadedModel> open_model(const std::optional<std::string>& path, int n_threads, int64_t n_ctx,
                                        const std::string& cache_type_k, const std::string& cache_type_v) {
  if (n_threads < 0) {
    throw py::value_error("n_threads must be 0 (every core this process may use) or positive, got " +
                          std::to_string(n_threads));
  }
  if (n_ctx < 0) throw py::value_error("n_ctx must be 0 (the model's) or positive, got " + std::to_string(n_ctx));
  for (const std::string& type : {cache_type_k, cache_type_v}) {
    try {
      check_kv_cache_type_name(type);
    } catch (const Error& e) {
      throw py::value_error(e.what());
    }
  }
  auto loaded = std::make_shared<LoadedModel>();
  loaded->model = load_model(path.value_or(embedded_model_path()));
  loaded->n_threads = n_threads == 0 ? default_thread_count() : n_threads;
  loaded->n_ctx = n_ctx;
  loaded->cache_type_k = cache_type_k;
  loaded->cache_type_v = cache_type_v;
  return loaded;
}

// The sampling parameters, checked as the server checks a request's (generation_params.h).
SamplerParams sampler_params(double temperature, int top_k, double top_p, double min_p, std::optional<int64_t> seed) {
  SamplerParams s;
  s.temperature = static_cast<float>(temperature);
  s.top_k = top_k;
  s.top_p = static_cast<float>(top_p);
  s.min_p = static_cast<float>(min_p);
  if (seed) {
    check_seed(*seed);
    s.seed = static_cast<uint64_t>(*seed);
  }
  check_sampling(s);
  return s;
}

// Python's max_tokens: -1 is no limit (up to the end of generation or a full context).
void check_python_max_tokens(int64_t max_tokens) {
  if (max_tokens != -1) check_max_tokens(max_tokens);
}

// A prompt given as token ids: ValueError for one outside the vocabulary (as Session.prefill).
void check_prompt_ids(const LoadedModel& m, const std::vector<int64_t>& ids) {
  const int64_t n_vocab = m.model->config().n_vocab;
  for (int64_t id : ids) {
    if (id < 0 || id >= n_vocab) {
      throw py::value_error("prompt: token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                            std::to_string(n_vocab - 1) + ")");
    }
  }
}

std::vector<int32_t> chat_prompt(const LoadedModel& m, const std::vector<std::pair<std::string, std::string>>& messages,
                                 const std::string& template_name) {
  const Tokenizer& tokenizer = m.model->tokenizer();
  std::vector<ChatMessage> turns;
  for (const auto& [role, content] : messages) {
    check_role(role);
    turns.push_back({role, content});
  }
  const ChatTemplate chat = ChatTemplate::detect(tokenizer, template_name);
  return tokenizer.encode(chat.apply(turns, true), true, true);
}

py::dict metadata(const LoadedModel& m) {
  const ModelConfig& c = m.model->config();
  py::dict d;
  d["path"] = m.model->path();
  d["architecture"] = c.arch_name;
  d["n_vocab"] = c.n_vocab;
  d["n_embd"] = c.n_embd;
  d["n_layer"] = c.n_layer;
  d["n_head"] = c.n_head;
  d["n_head_kv"] = c.n_head_kv;
  d["head_dim"] = c.head_dim;
  d["n_ff"] = c.n_ff;
  d["n_ctx_train"] = c.n_ctx_train;
  d["rope_base"] = c.rope_base;
  d["rms_eps"] = c.rms_eps;
  d["tokenizer"] = m.model->tokenizer().model_name();
  return d;
}

}  // namespace

void bind_model(py::module_& m) {
  // Stop strings are Python's own to apply (generate's _TextSteps), checked as the server's.
  m.def("check_stop", [](const std::vector<std::string>& stop) { check_stop(stop); });
  py::class_<LoadedModel, std::shared_ptr<LoadedModel>>(m, "_Model")
      .def(py::init(&open_model), py::arg("path"), py::arg("n_threads"), py::arg("n_ctx"), py::arg("cache_type_k"),
           py::arg("cache_type_v"))
      .def("tokenize",
           [](const LoadedModel& self, const std::string& text, bool add_bos, bool parse_special) {
             return self.model->tokenizer().encode(text, add_bos, parse_special);
           })
      .def("detokenize",
           [](const LoadedModel& self, const std::vector<int32_t>& ids) {
             const int64_t n_vocab = self.model->config().n_vocab;
             for (int32_t id : ids) {
               if (id < 0 || id >= n_vocab) {
                 throw py::value_error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                       std::to_string(n_vocab - 1) + ")");
               }
             }
             return py::bytes(self.model->tokenizer().decode(ids));
           })
      .def("chat_prompt", &chat_prompt)
      .def("check_prompt_ids", &check_prompt_ids)
      .def_property_readonly("chat_template", [](const LoadedModel& self) { return self.model->tokenizer().chat_template(); })
      .def_property_readonly("metadata", &metadata)
      .def_readonly("n_threads", &LoadedModel::n_threads)
      .def_readonly("cache_type_k", &LoadedModel::cache_type_k)
      .def_readonly("cache_type_v", &LoadedModel::cache_type_v)
      .def("generation",
           [](const LoadedModel& self, const std::vector<int32_t>& prompt, int64_t max_tokens, double temperature,
              int top_k, double top_p, double min_p, std::optional<int64_t> seed, const std::string& press, std::optional<int64_t> kv_budget,
              std::optional<double> kv_ratio, const std::optional<std::string>& draft_model) {
             check_python_max_tokens(max_tokens);
             const SamplerParams sampling = sampler_params(temperature, top_k, top_p, min_p, seed);
             std::shared_ptr<Session> session =
                 new_session(self, session_options(self), press, kv_budget, kv_ratio, draft_model);
             py::gil_scoped_release release;
             return std::make_unique<Generation>(std::move(session), prompt, sampling, max_tokens);
           })
      .def("compressed_session",
           [](const LoadedModel& self, const std::vector<int32_t>& context, const std::string& press, std::optional<int64_t> kv_budget,
              std::optional<double> kv_ratio) {
             std::shared_ptr<Session> session =
                 new_session(self, session_options(self), press, kv_budget, kv_ratio, std::nullopt);
             // deferkv resumes: its context is shared (deferred), each answer evicting at its step d.
             const bool answers_once =
                 press != "full" && press_evicts_after_prefill(press) && !press_resumes_deferred(press);
             return compress_context(std::move(session), context, answers_once);
           })
      .def("answer_generation",
           [](const LoadedModel& self, CompressedContext& context, const std::vector<int32_t>& question,
              int64_t max_tokens, double temperature, int top_k, double top_p, double min_p,
              std::optional<int64_t> seed) {
             check_python_max_tokens(max_tokens);
             const SamplerParams sampling = sampler_params(temperature, top_k, top_p, min_p, seed);
             return answer_generation(self, context, question, sampling, max_tokens);
           })
      .def("load_context", &load_context);
}

}  // namespace deferkv::python
