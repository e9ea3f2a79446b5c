// A model file that is readable GGUF but not a model deferkv can run gives an Error
// naming what is wrong: unknown architecture, missing tensor, unsupported tensor type,
// wrong shape, inconsistent head counts.
#include <gtest/gtest.h>

#include <filesystem>
#include <deque>
#include <functional>

#include "deferkv/error.h"
#include "deferkv/model.h"
#include "model/test_models.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"

namespace deferkv {
namespace {

struct Edit {
  std::function<void(std::string& key, GgufValue& value)> metadata = [](std::string&, GgufValue&) {};
  // Return false to drop the tensor; may change its name or type id.
  std::function<bool(std::string& name, uint32_t& type, std::vector<int64_t>& ne)> tensor =
      [](std::string&, uint32_t&, std::vector<int64_t>&) { return true; };
};

// Copies a small random model with an edit applied. Tensor bytes are copied as they are,
// with fresh zero bytes when the edit changes the size.
std::string edited_model(const std::string& name, const Edit& edit) {
  RandomModelSpec spec;
  spec.n_embd = 64;
  spec.n_head = 2;
  spec.n_head_kv = 1;
  spec.n_ff = 128;
  spec.n_layer = 1;
  GgufFile source(testing::random_model_path(spec));
  GgufWriter writer;
  for (auto [key, value] : source.metadata()) {
    edit.metadata(key, value);
    writer.add_metadata(key, value);
  }
  static std::deque<std::vector<uint8_t>> buffers;
  for (const auto& t : source.tensors()) {
    std::string tensor_name = t.name;
    uint32_t type = t.ggml_type;
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (!edit.tensor(tensor_name, type, ne)) continue;
    auto layout = ggml_type_layout(type);
    int64_t elements = 1;
    for (int64_t d : ne) elements *= d;
    const size_t bytes = static_cast<size_t>(elements / layout->block_elems * layout->block_bytes);
    if (bytes == t.nbytes) {
      writer.add_tensor(tensor_name, type, ne, t.data, bytes);
    } else {
      buffers.emplace_back(bytes, 0);
      writer.add_tensor(tensor_name, type, ne, buffers.back().data(), bytes);
    }
  }
  const auto path = std::filesystem::path(testing::random_model_path(spec)).parent_path() / (name + ".gguf");
  writer.write(path.string());
  return path.string();
}

void expect_load_error(const std::string& path, const std::string& fragment) {
  try {
    Model::load(path);
    FAIL() << "expected an error containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ModelErrors, UnknownArchitectureIsNamed) {
  Edit edit;
  edit.metadata = [](std::string& key, GgufValue& value) {
    if (key == "general.architecture") value = GgufValue::of_string("mamba");
  };
  expect_load_error(edited_model("arch-mamba", edit), "unknown architecture 'mamba'");
}

TEST(ModelErrors, MissingTensorIsNamed) {
  Edit edit;
  edit.tensor = [](std::string& name, uint32_t&, std::vector<int64_t>&) { return name != "blk.0.ffn_up.weight"; };
  expect_load_error(edited_model("no-ffn-up", edit), "tensor 'blk.0.ffn_up.weight' is missing");
}

TEST(ModelErrors, UnsupportedTensorTypeIsNamed) {
  Edit edit;
  edit.tensor = [](std::string& name, uint32_t& type, std::vector<int64_t>& ne) {
    if (name == "blk.0.attn_q.weight") {
      type = 10;  // Q2_K: a real ggml type without kernels here
      ne[0] = 256;
    }
    return true;
  };
  expect_load_error(edited_model("q2k", edit), "blk.0.attn_q.weight");
}

TEST(ModelErrors, WrongShapeIsNamed) {
  Edit edit;
  edit.tensor = [](std::string& name, uint32_t&, std::vector<int64_t>& ne) {
    if (name == "blk.0.attn_k.weight") ne[1] = 64;
    return true;
  };
  expect_load_error(edited_model("k-shape", edit), "blk.0.attn_k.weight' has shape [64, 64], expected [64, 32]");
}

TEST(ModelErrors, HeadCountsMustDivide) {
  Edit edit;
  edit.metadata = [](std::string& key, GgufValue& value) {
    if (key == "llama.attention.head_count_kv") value = GgufValue::of_u32(3);
  };
  expect_load_error(edited_model("kv-heads", edit), "not a multiple of head_count_kv 3");
}

TEST(ModelErrors, MissingHyperParameterIsNamed) {
  Edit edit;
  edit.metadata = [](std::string& key, GgufValue&) {
    if (key == "llama.block_count") key = "llama.block_count_renamed";
  };
  expect_load_error(edited_model("no-blocks", edit), "'llama.block_count' is missing");
}

TEST(ModelErrors, VocabOnlyFileIsNotAModel) {
  expect_load_error(std::string(DEFERKV_TEST_DATA) + "/vocab/ggml-vocab-llama-spm.gguf",
                    "tensor 'token_embd.weight' is missing");
}

}  // namespace
}  // namespace deferkv
