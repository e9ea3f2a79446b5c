#include "press/press_test_util.h"

#include <algorithm>
#include <random>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/generate.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "press/lookahead_test_util.h"

namespace deferkv::testing {

std::string press_test_model_path() {
  RandomModelSpec spec;
  spec.n_embd = 64;
  spec.n_layer = 3;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.head_dim = 32;
  spec.n_ff = 128;
  spec.seed = 11;
  return random_model_path(spec);
}

std::string press_error(const std::string& spec, const KvBudget& budget) {
  try {
    make_press(spec, budget);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<int32_t> random_prompt(int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(3, 500);
  std::vector<int32_t> out(static_cast<size_t>(length));
  for (auto& t : out) t = token(rng);
  return out;
}

namespace {

std::string with_test_files(std::string spec) {
  const std::string placeholder = "{lookahead_weights}";
  if (const size_t at = spec.find(placeholder); at != std::string::npos) {
    spec.replace(at, placeholder.size(), press_test_lookahead_weights_path());
  }
  return spec;
}

PressRun run_on_model(const std::string& model_path, const std::string& spec, const KvBudget& budget,
                      const std::vector<int32_t>& context, const std::vector<int32_t>& question, bool question_agnostic,
                      int64_t n_decode, const std::string& cache_type) {
  static std::map<std::string, std::shared_ptr<const Model>> models;
  auto& model = models[model_path];
  if (!model) model = Model::load(model_path);
  PressRun run;
  SessionOptions options;
  options.n_ctx = 512;
  options.n_batch = 48;  // several batches, so the window can straddle two
  options.cache_type_k = options.cache_type_v = cache_type;
  run.session = std::make_unique<Session>(model, std::make_shared<ThreadPool>(2), options);
  if (spec != "full") run.session->set_press(make_press(with_test_files(spec), budget));
  const int64_t n_vocab = model->config().n_vocab;
  auto argmax = [&] {
    const float* l = run.session->last_logits();
    run.logits.emplace_back(l, l + n_vocab);
    return static_cast<int32_t>(std::max_element(l, l + n_vocab) - l);
  };
  prefill_prompt(*run.session, context, question, question_agnostic);
  run.generated.push_back(argmax());
  for (int64_t s = 0; s < n_decode; ++s) {
    run.session->decode(run.generated.back());
    run.generated.push_back(argmax());
  }
  const KvCache& kv = kv_cache_of(*run.session);
  run.positions.resize(static_cast<size_t>(kv.n_layer()));
  for (int64_t l = 0; l < kv.n_layer(); ++l) {
    for (int64_t g = 0; g < kv.n_head_kv(); ++g) {
      run.positions[l].emplace_back(kv.positions(l, g), kv.positions(l, g) + kv.length(l, g));
    }
  }
  return run;
}

}  // namespace

PressRun run_press(const std::string& spec, const KvBudget& budget, const std::vector<int32_t>& prompt,
                   int64_t n_decode, const std::string& cache_type) {
  return run_press_on_model(press_test_model_path(), spec, budget, prompt, n_decode, cache_type);
}

PressRun run_press_on_model(const std::string& model_path, const std::string& spec, const KvBudget& budget,
                            const std::vector<int32_t>& prompt, int64_t n_decode, const std::string& cache_type) {
  return run_on_model(model_path, spec, budget, prompt, {}, false, n_decode, cache_type);
}

PressRun run_press_with_question(const std::string& model_path, const std::string& spec, const KvBudget& budget,
                                 const std::vector<int32_t>& context, const std::vector<int32_t>& question,
                                 bool question_agnostic, int64_t n_decode) {
  return run_on_model(model_path, spec, budget, context, question, question_agnostic, n_decode, "f32");
}

const std::vector<std::string>& press_test_cache_types() {
  static const std::vector<std::string> types = {"f32", "f16", "q8_0"};
  return types;
}

int64_t differing_heads(const PressRun& a, const PressRun& b) {
  int64_t differing = 0;
  for (size_t l = 0; l < a.positions.size(); ++l) {
    for (size_t g = 0; g < a.positions[l].size(); ++g) differing += a.positions[l][g] != b.positions[l][g];
  }
  return differing;
}

void press_prompt_begins(Press& press, KvCache& cache, int64_t first_position, int64_t n_tokens) {
  if (press.points().has(PressPoint::kPromptBegin)) {
    press.act({.point = PressPoint::kPromptBegin, .first_position = first_position, .n_tokens = n_tokens}, cache);
  }
}

namespace {

void layers_then_end(Press& press, KvCache& cache, PressPoint layer_end, PressPoint end, int64_t step) {
  const PressPoints points = press.points();
  if (points.has(layer_end)) {
    for (int64_t l = 0; l < cache.n_layer(); ++l) press.act({.point = layer_end, .layer = l, .step = step}, cache);
  }
  if (points.has(end)) press.act({.point = end, .step = step}, cache);
}

}  // namespace

void press_prompt_ends(Press& press, KvCache& cache) {
  layers_then_end(press, cache, PressPoint::kPromptLayerEnd, PressPoint::kPromptEnd, 0);
}

void press_decode_step_ends(Press& press, KvCache& cache, int64_t step) {
  layers_then_end(press, cache, PressPoint::kDecodeLayerEnd, PressPoint::kDecodeStep, step);
}

}  // namespace deferkv::testing
