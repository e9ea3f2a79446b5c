// The LookaheadKV weights file: a round trip through the writer and the reader, and a
// clear error for each way a file or its model can be wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/session.h"
#include "press/lookahead_test_util.h"
#include "press/press_test_util.h"
#include "tensor/gguf_test_util.h"
#include "tensor/gguf_writer.h"

namespace deferkv {
namespace {

using gguf_test::TempDir;

TEST(LookaheadWeights, ThePressIsListedWithItsParameters) {
  const auto& catalogue = press_catalogue();
  const auto info = std::find_if(catalogue.begin(), catalogue.end(), [](const PressInfo& i) { return i.name == "lookaheadkv"; });
  ASSERT_NE(info, catalogue.end());
  std::vector<std::string> names;
  for (const auto& p : info->parameters) names.push_back(p.name + "=" + p.default_value);
  // Its own, then the shared allocation and selection (the rows observe once: no trigger).
  EXPECT_EQ(names, (std::vector<std::string>{"weights=", "window=32", "kernel=7", "pooling=max", "gqa=mean",
                                             "queries=mean", "alloc=uniform", "rounding=exact", "beta=20", "alpha=0.2",
                                             "profile=", "ratios=", "chunk=0", "reuse=1"}));
  EXPECT_TRUE(info->uses_budget);
}

TEST(LookaheadWeights, RoundTripKeepsEveryValue) {
  TempDir dir;
  const PressModelShape shape{2, 4, 2, 8, 32, 48};
  LookaheadWeights w = testing::random_lookahead_weights(shape, 5, 3, 0.5f, 3);
  w.targets = {Projection::kV, Projection::kDown};  // a subset, in a non-canonical order
  for (auto& layer : w.rows.layers) {
    for (Projection p : {Projection::kQ, Projection::kK, Projection::kO, Projection::kGate, Projection::kUp}) {
      layer[static_cast<size_t>(p)] = {};
    }
  }
  w.base_architecture = "qwen2";
  save_lookahead_weights(dir.file("w.gguf"), w);
  const LookaheadWeights read = load_lookahead_weights(dir.file("w.gguf"));
  EXPECT_EQ(read.base_architecture, "qwen2");
  EXPECT_EQ(read.base_n_embd, 32);
  EXPECT_EQ(read.base_n_layer, 2);
  EXPECT_EQ(read.lora_rank, 3);
  EXPECT_EQ(read.lora_alpha, 6.0f);
  EXPECT_EQ(read.targets, w.targets);
  EXPECT_EQ(read.rows.n_embd, 32);
  EXPECT_EQ(read.rows.n_rows(), 5);
  EXPECT_EQ(read.rows.embeddings, w.rows.embeddings);
  ASSERT_EQ(read.rows.layers.size(), 2u);
  for (int64_t l = 0; l < 2; ++l) {
    for (size_t p = 0; p < kProjectionCount; ++p) {
      const LowRankDelta& a = read.rows.layers[l][p];
      const LowRankDelta& b = w.rows.layers[l][p];
      SCOPED_TRACE(std::to_string(l) + " " + projection_name(static_cast<Projection>(p)));
      EXPECT_EQ(a.rank, b.rank);
      EXPECT_EQ(a.in, b.in);
      EXPECT_EQ(a.out, b.out);
      EXPECT_EQ(a.scale, b.scale);
      EXPECT_EQ(a.a, b.a);
      EXPECT_EQ(a.b, b.b);
    }
  }
  check_lookahead_weights_fit(read, shape, "w.gguf");  // fits the shape it was made for
}

// A valid file written piece by piece (n_embd 8, 2 layers, 3 rows, rank 2, targets q and
// down), so each test can break one piece.
struct RawWeightsFile {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
  };
  std::vector<Tensor> tensors;

  RawWeightsFile() {
    auto u32 = [](uint32_t v) { return GgufValue::of_u32(v); };
    metadata = {{"general.architecture", GgufValue::of_string("lookaheadkv")},
                {"lookaheadkv.format_version", u32(1)},
                {"lookaheadkv.base.architecture", GgufValue::of_string("llama")},
                {"lookaheadkv.base.n_embd", u32(8)},
                {"lookaheadkv.base.n_layer", u32(2)},
                {"lookaheadkv.n_lookahead", u32(3)},
                {"lookaheadkv.lora_rank", u32(2)},
                {"lookaheadkv.lora_alpha", GgufValue::of_f32(4.0f)},
                {"lookaheadkv.targets", targets({"q", "down"})}};
    tensors = {{"lookahead.embeddings", {8, 3}}};
    for (int l = 0; l < 2; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      tensors.push_back({b + "q.lora_a", {8, 2}});
      tensors.push_back({b + "q.lora_b", {2, 16}});
      tensors.push_back({b + "down.lora_a", {12, 2}});
      tensors.push_back({b + "down.lora_b", {2, 8}});
    }
  }

  static GgufValue targets(const std::vector<std::string>& names) {
    std::vector<GgufValue> items;
    for (const auto& n : names) items.push_back(GgufValue::of_string(n));
    return GgufValue::of_array(GgufType::STRING, std::move(items));
  }
  void set(const std::string& key, GgufValue value) {
    for (auto& [k, v] : metadata) {
      if (k == key) v = std::move(value);
    }
  }
  void drop(const std::string& name) {
    std::erase_if(metadata, [&](const auto& kv) { return kv.first == name; });
    std::erase_if(tensors, [&](const Tensor& t) { return t.name == name; });
  }
  void reshape(const std::string& name, std::vector<int64_t> ne) {
    for (auto& t : tensors) {
      if (t.name == name) t.ne = std::move(ne);
    }
  }

  std::string write(const TempDir& dir) const {
    GgufWriter writer;
    for (const auto& [k, v] : metadata) writer.add_metadata(k, v);
    std::vector<std::vector<float>> data;
    data.reserve(tensors.size());
    for (const auto& t : tensors) {
      int64_t n = 1;
      for (int64_t e : t.ne) n *= e;
      data.emplace_back(static_cast<size_t>(n), 0.25f);
      writer.add_tensor(t.name, DType::F32, t.ne, data.back().data(), data.back().size() * sizeof(float));
    }
    writer.write(dir.file("w.gguf"));
    return dir.file("w.gguf");
  }
};

std::string load_error(const std::string& path) {
  try {
    load_lookahead_weights(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string load_error(RawWeightsFile file) {
  TempDir dir;
  return load_error(file.write(dir));
}

#define EXPECT_MENTIONS(message, text) EXPECT_NE((message).find(text), std::string::npos) << (message)

TEST(LookaheadWeights, TheValidRawFileLoads) {
  TempDir dir;
  const LookaheadWeights w = load_lookahead_weights(RawWeightsFile().write(dir));
  EXPECT_EQ(w.rows.n_rows(), 3);
  EXPECT_EQ(w.rows.delta(1, Projection::kDown).in, 12);
  EXPECT_EQ(w.rows.delta(1, Projection::kDown).scale, 2.0f);
  EXPECT_TRUE(w.rows.delta(1, Projection::kV).empty());
}

TEST(LookaheadWeights, EveryMalformedFileIsAClearError) {
  EXPECT_MENTIONS(load_error("/nonexistent/w.gguf"), "cannot read the LookaheadKV weights '/nonexistent/w.gguf'");
  {
    TempDir dir;
    std::ofstream(dir.file("text.gguf")) << "not a gguf at all, just some text";
    EXPECT_MENTIONS(load_error(dir.file("text.gguf")), "not a GGUF file");
  }
  RawWeightsFile f;
  f.set("general.architecture", GgufValue::of_string("llama"));
  EXPECT_MENTIONS(load_error(f), "is not a LookaheadKV weights file (general.architecture is 'llama'");
  f = {};
  f.set("lookaheadkv.format_version", GgufValue::of_u32(2));
  EXPECT_MENTIONS(load_error(f), "format version 2");
  f = {};
  f.drop("lookaheadkv.lora_rank");
  EXPECT_MENTIONS(load_error(f), "metadata key 'lookaheadkv.lora_rank' is missing");
  f = {};
  f.set("lookaheadkv.n_lookahead", GgufValue::of_u32(0));
  EXPECT_MENTIONS(load_error(f), "lookaheadkv.n_lookahead is 0");
  f = {};
  f.set("lookaheadkv.lora_alpha", GgufValue::of_string("sixteen"));
  EXPECT_MENTIONS(load_error(f), "lookaheadkv.lora_alpha");
  f = {};
  f.set("lookaheadkv.targets", RawWeightsFile::targets({"q", "query"}));
  EXPECT_MENTIONS(load_error(f), "unknown target 'query'");
  f = {};
  f.set("lookaheadkv.targets", RawWeightsFile::targets({"q", "down", "q"}));
  EXPECT_MENTIONS(load_error(f), "target 'q' is listed twice");
  // A corrupt layer count (found by fuzz/fuzz_lookahead_weights.cpp: it allocated ~56 GB
  // of empty deltas before reading a tensor), with and without targets.
  f = {};
  f.set("lookaheadkv.base.n_layer", GgufValue::of_u32(1u << 28));
  EXPECT_MENTIONS(load_error(f), "lookaheadkv.base.n_layer is 268435456 (at most 4096 layers)");
  f = {};
  f.set("lookaheadkv.targets", RawWeightsFile::targets({}));
  f.set("lookaheadkv.base.n_layer", GgufValue::of_u32(1u << 28));
  EXPECT_MENTIONS(load_error(f), "(at most 4096 layers)");
  f = {};
  f.drop("blk.1.down.lora_b");
  EXPECT_MENTIONS(load_error(f), "tensor 'blk.1.down.lora_b' is missing");
  f = {};
  f.reshape("lookahead.embeddings", {8, 4});
  EXPECT_MENTIONS(load_error(f), "tensor 'lookahead.embeddings' has shape [8, 4], expected [8, 3]");
  f = {};
  f.reshape("blk.0.q.lora_a", {8, 3});
  EXPECT_MENTIONS(load_error(f), "tensor 'blk.0.q.lora_a' has shape [8, 3], expected [in, 2]");
  f = {};
  f.reshape("blk.1.q.lora_b", {16, 2});
  EXPECT_MENTIONS(load_error(f), "tensor 'blk.1.q.lora_b' has shape [16, 2], expected [2, out]");
  f = {};
  f.reshape("blk.0.down.lora_b", {16});
  EXPECT_MENTIONS(load_error(f), "tensor 'blk.0.down.lora_b' has shape [16], expected 2 dimensions");
  f = {};
  f.reshape("blk.0.q.lora_a", {6, 2});
  EXPECT_MENTIONS(load_error(f), "blk.0.q.lora_a of 'q' (6 inputs, 16 outputs) does not match n_embd 8");
  f = {};
  f.reshape("blk.1.down.lora_b", {2, 7});
  EXPECT_MENTIONS(load_error(f), "blk.1.down.lora_b of 'down' (12 inputs, 7 outputs) does not match n_embd 8");
  f = {};
  f.tensors.push_back({"blk.2.q.lora_a", {8, 2}});
  EXPECT_MENTIONS(load_error(f), "tensor 'blk.2.q.lora_a' is not part of the format");
  f = {};
  f.set("lookaheadkv.targets", RawWeightsFile::targets({"q"}));
  EXPECT_MENTIONS(load_error(f), "tensor 'blk.0.down.lora_a' is not part of the format");
}

std::string attach_error(const std::string& spec) {
  try {
    auto model = Model::load(testing::press_test_model_path());
    Session session(model, std::make_shared<ThreadPool>(1));
    session.set_press(make_press(spec, KvBudget::per_head(32)));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(LookaheadWeights, AWrongModelIsAClearErrorAtAttachTime) {
  // The test model has no weights beside it.
  EXPECT_MENTIONS(attach_error("lookaheadkv"), "press 'lookaheadkv' needs weights=PATH: none was given and there is no '" +
                                                   std::filesystem::path(testing::press_test_model_path())
                                                       .replace_extension(".lookahead.gguf")
                                                       .string() +
                                                   "' beside the model");
  TempDir dir;
  const std::string other = RawWeightsFile().write(dir);  // n_embd 8, 2 layers
  EXPECT_MENTIONS(attach_error("lookaheadkv:weights=" + other),
                  "are for a llama model with n_embd 8 and 2 layers; this model has n_embd 64 and 3 layers");
  // Right n_embd and layers, but a q delta with the width of the KV projections.
  const PressModelShape shape = testing::model_shape(testing::press_test_model_path());
  LookaheadWeights w = testing::random_lookahead_weights(shape, 4, 2, 0.1f, 5);
  w.rows.layers[0][0] = w.rows.layers[0][1];  // layer 0's q delta := its k delta (64 -> 64)
  save_lookahead_weights(dir.file("narrow-q.gguf"), w);
  EXPECT_MENTIONS(attach_error("lookaheadkv:weights=" + dir.file("narrow-q.gguf")),
                  "the 'q' delta of layer 0 maps 64 to 64 values; this model's 'q' projection maps 64 to 128");
}

}  // namespace
}  // namespace deferkv
