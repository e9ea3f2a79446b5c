// Trained weights into a GGUF model: the engine's logits on a model exported by
// tools/train (PyTorch's own logits recorded beside it), a lossless F32 round trip of a
// random model's tensors, and each bad input's error.
#include "model/weights_import.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/session.h"
#include "model/reference_forward.h"
#include "model/test_models.h"
#include "support/read_file.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_test_util.h"
#include "tensor/safetensors_file.h"
#include "tensor/safetensors_test_util.h"

namespace deferkv {
namespace {

using gguf_test::TempDir;
using safetensors_test::f32_tensor;
using safetensors_test::RawTensor;
using safetensors_test::write_safetensors;

const std::string kFixture = std::string(DEFERKV_TEST_DATA) + "/train/tiny.safetensors";

std::string import_error(const WeightsImport& request) {
  try {
    import_weights(request);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsValues, ConvertsEachFloatTypeToF32) {
  TempDir dir;
  RawTensor half{"h", "F16", {2}, {0x00, 0x3c, 0x00, 0xc0}};  // 1.0, -2.0
  RawTensor brain{"b", "BF16", {2}, {0x80, 0x3f, 0x40, 0xc0}};  // 1.0, -3.0
  write_safetensors(dir.file("a.safetensors"), {{"k", "v"}},
                    {f32_tensor("f", {2, 2}, {1.5f, -2.5f, 3.0f, 0.25f}), half, brain});
  const SafetensorsFile file(dir.file("a.safetensors"));
  EXPECT_EQ(safetensors_values(file.tensor("f")), (std::vector<float>{1.5f, -2.5f, 3.0f, 0.25f}));
  EXPECT_EQ(safetensors_values(file.tensor("h")), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(safetensors_values(file.tensor("b")), (std::vector<float>{1.0f, -3.0f}));
}

TEST(WeightsImport, EngineMatchesPyTorchOnAnExportedModel) {
  TempDir dir;
  const std::string gguf = dir.file("tiny.gguf");
  import_weights({kFixture, testing::stories_model_path(), gguf, DType::F32, ""});

  const auto expected = nlohmann::json::parse(testing::read_file(std::string(DEFERKV_TEST_DATA) + "/train/tiny_logits.json"));
  const std::vector<int32_t> tokens = expected["tokens"].get<std::vector<int32_t>>();
  auto model = Model::load(gguf);
  ASSERT_EQ(model->config().n_vocab, 512);
  SessionOptions options;
  options.n_ctx = 64;
  options.all_logits = true;
  options.cache_type_k = options.cache_type_v = "f32";  // compared at float32 precision
  Session session(model, std::make_shared<ThreadPool>(2), options);
  session.prefill(tokens);
  const auto reference = testing::reference_logits(gguf, tokens);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<double> torch_row = expected["logits"][t].get<std::vector<double>>();
    const float* ours = session.logits().data() + t * 512;
    // PyTorch's float32 forward (the trainer's model) against ours and the f64 reference.
    EXPECT_LT(testing::relative_l2(ours, torch_row), 1e-4) << "position " << t;
    std::vector<float> torch_f32(torch_row.begin(), torch_row.end());
    EXPECT_LT(testing::relative_l2(torch_f32.data(), reference[t]), 1e-4) << "position " << t;
  }
}

TEST(WeightsImport, StoresTheTypeAskedAndTheTrainersMetadata) {
  TempDir dir;
  import_weights({kFixture, testing::stories_model_path(), dir.file("q8.gguf"), DType::Q8_0, "my-model"});
  const GgufFile file(dir.file("q8.gguf"));
  EXPECT_EQ(file.get_string("general.name"), "my-model");
  EXPECT_EQ(file.get_string("general.description"), "tools/train/make_export_fixture.py");
  EXPECT_EQ(file.find_tensor("blk.0.ffn_up.weight")->ggml_type, static_cast<uint32_t>(DType::Q8_0));
  EXPECT_EQ(file.find_tensor("blk.0.ffn_norm.weight")->ggml_type, static_cast<uint32_t>(DType::F32));
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr);  // tied to the embeddings
  EXPECT_EQ(file.get_u64("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "llama");
}

// A random model's tensors, written out as safetensors the way export.py names them,
// come back bit for bit.
TEST(WeightsImport, RoundTripsARandomModelLosslesslyAtF32) {
  TempDir dir;
  RandomModelSpec spec;
  spec.n_embd = 64, spec.n_layer = 2, spec.n_head = 4, spec.n_head_kv = 2, spec.n_ff = 96, spec.tied_output = true;
  const std::string original_path = testing::random_model_path(spec);
  const GgufFile original(original_path);
  std::vector<RawTensor> tensors;
  for (const GgufTensorInfo& t : original.tensors()) {
    std::vector<int64_t> shape;  // ggml ne reversed is PyTorch's shape
    for (int d = static_cast<int>(t.n_dims) - 1; d >= 0; --d) shape.push_back(t.ne[static_cast<size_t>(d)]);
    tensors.push_back({t.name, "F32", shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
  }
  const std::map<std::string, std::string> metadata = {
      {"architecture", "llama"}, {"n_vocab", "512"}, {"n_embd", "64"},      {"n_layer", "2"},
      {"n_head", "4"},           {"n_head_kv", "2"}, {"n_ff", "96"},        {"n_ctx", "4096"},
      {"rope_base", "10000"},    {"rms_eps", "1e-06"}};
  write_safetensors(dir.file("w.safetensors"), metadata, tensors);
  import_weights({dir.file("w.safetensors"), testing::stories_model_path(), dir.file("back.gguf"), DType::F32, "x"});
  const GgufFile back(dir.file("back.gguf"));
  ASSERT_EQ(back.tensors().size(), original.tensors().size());
  for (const GgufTensorInfo& t : original.tensors()) {
    const GgufTensorInfo* u = back.find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->ne, t.ne) << t.name;
    ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
    EXPECT_EQ(std::memcmp(u->data, t.data, t.nbytes), 0) << t.name;
  }
}

TEST(WeightsImport, RefusesBadInputNamingTheProblem) {
  TempDir dir;
  const SafetensorsFile fixture(kFixture);
  auto rewrite = [&](const std::string& name, std::map<std::string, std::string> metadata,
                     const std::function<void(std::vector<RawTensor>&)>& edit) {
    std::vector<RawTensor> tensors;
    for (const SafetensorsTensor& t : fixture.tensors()) {
      tensors.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
    }
    edit(tensors);
    write_safetensors(dir.file(name), metadata, tensors);
    return WeightsImport{dir.file(name), testing::stories_model_path(), dir.file(name + ".gguf"), DType::F16, ""};
  };
  const auto metadata = fixture.metadata();
  auto without = [&](const std::string& key) {
    auto m = metadata;
    m.erase(key);
    return m;
  };
  auto with = [&](const std::string& key, const std::string& value) {
    auto m = metadata;
    m[key] = value;
    return m;
  };
  const auto keep = [](std::vector<RawTensor>&) {};

  EXPECT_NE(import_error(rewrite("a", without("n_head"), keep)).find("metadata lacks 'n_head'"), std::string::npos);
  EXPECT_NE(import_error(rewrite("b", with("n_layer", "two"), keep)).find("'n_layer' = 'two' is not a positive integer"),
            std::string::npos);
  EXPECT_NE(import_error(rewrite("c", with("architecture", "mamba"), keep)).find("architecture 'mamba'"),
            std::string::npos);
  EXPECT_NE(import_error(rewrite("d", metadata, [](auto& t) { t.pop_back(); })).find("has no tensor"),
            std::string::npos);
  EXPECT_NE(import_error(rewrite("e", metadata, [](auto& t) { t.push_back({"blk.0.atn_q.weight", "F32", {1}, {0, 0, 0, 0}}); }))
                .find("unexpected tensor 'blk.0.atn_q.weight'"),
            std::string::npos);
  EXPECT_NE(import_error(rewrite("f", with("n_ff", "128"), keep)).find("the hyperparameters need [128, 64]"),
            std::string::npos);
  EXPECT_NE(import_error(rewrite("g", with("n_vocab", "32000"), keep)).find("has 32000 embedding rows"),
            std::string::npos);

  // A matrix row of 64 values is not a whole number of Q4_K's 256-value blocks.
  WeightsImport q4 = rewrite("h", metadata, keep);
  q4.type = DType::Q4_K;
  EXPECT_NE(import_error(q4).find("not a multiple of Q4_K's block size 256"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(q4.output));  // nothing half-written
}

}  // namespace
}  // namespace deferkv
