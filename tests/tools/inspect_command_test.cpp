// `deferkv inspect`, run as the built CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/gguf_file.h"
#include "tensor/gguf_test_util.h"
#include "tensor/gguf_writer.h"
#include "tools/cli_runner.h"

namespace deferkv {
namespace {

using Json = nlohmann::ordered_json;

const std::string kStories = DEFERKV_SOURCE_DIR "/models/stories260K.gguf";

using testing::CliResult;
using testing::run_cli;

// The output of a successful `deferkv inspect <arguments>`.
std::string run_inspect(const std::string& arguments) {
  CliResult result = run_cli("inspect " + arguments);
  EXPECT_EQ(result.status, 0) << result.output;
  return result.output;
}

TEST(InspectCommand, JsonDescribesStories260K) {
  auto json = Json::parse(run_inspect("--json -m '" + kStories + "'"));
  GgufFile file(kStories);
  EXPECT_EQ(json["file"], kStories);
  EXPECT_EQ(json["version"], 3);
  EXPECT_EQ(json["alignment"], 32);
  EXPECT_EQ(json["data_offset"], file.data_offset());
  EXPECT_EQ(json["file_size"], file.file_size());

  const Json& metadata = json["metadata"];
  ASSERT_EQ(metadata.size(), 19u);
  EXPECT_EQ(metadata[0]["key"], "tokenizer.ggml.tokens");  // file order
  auto entry = [&](const std::string& key) {
    for (const Json& e : metadata) {
      if (e["key"] == key) return e;
    }
    ADD_FAILURE() << "no " << key;
    return Json();
  };
  Json arch = entry("general.architecture");
  EXPECT_EQ(arch["type"], "STRING");
  EXPECT_EQ(arch["value"], "llama");
  EXPECT_EQ(arch["abbreviated"], false);
  EXPECT_EQ(entry("llama.block_count")["value"], 5);
  EXPECT_EQ(entry("llama.attention.layer_norm_rms_epsilon")["value"], 1e-5);
  Json tokens = entry("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens["type"], "ARRAY");
  EXPECT_EQ(tokens["element_type"], "STRING");
  EXPECT_EQ(tokens["count"], 512);
  EXPECT_EQ(tokens["value"].size(), 8u);
  EXPECT_EQ(tokens["value"][1], "<s>");
  EXPECT_EQ(tokens["abbreviated"], true);

  const Json& tensors = json["tensors"];
  ASSERT_EQ(tensors.size(), 48u);
  EXPECT_EQ(tensors[0]["index"], 0);
  EXPECT_EQ(tensors[0]["name"], file.tensors()[0].name);
  const Json& embd = *std::find_if(tensors.begin(), tensors.end(),
                                   [](const Json& t) { return t["name"] == "token_embd.weight"; });
  EXPECT_EQ(embd["type"], "F32");
  EXPECT_EQ(embd["type_id"], 0);
  EXPECT_EQ(embd["shape"], Json::array({64, 512}));
  EXPECT_EQ(embd["bytes"], 64 * 512 * 4);
  EXPECT_EQ(embd["offset"], file.find_tensor("token_embd.weight")->offset);

  int64_t params = 0;
  for (const auto& t : file.tensors()) params += t.n_elements();
  const Json& totals = json["totals"];
  EXPECT_EQ(totals["tensors"], 48);
  EXPECT_EQ(totals["params"], params);
  EXPECT_EQ(totals["bytes"], params * 4);
  EXPECT_EQ(totals["by_type"],
            Json({{"F32", {{"tensors", 48}, {"params", params}, {"bytes", params * 4}}}}));
}

TEST(InspectCommand, AllValuesPrintsArraysInFull) {
  auto json = Json::parse(run_inspect("-m '" + kStories + "' --json --all-values"));
  for (const Json& e : json["metadata"]) {
    EXPECT_EQ(e["abbreviated"], false) << e["key"];
    if (e["key"] == "tokenizer.ggml.tokens") {
      EXPECT_EQ(e["value"].size(), 512u);
    }
  }
}

TEST(InspectCommand, TextListsMetadataAndTensors) {
  std::string text = run_inspect("-m '" + kStories + "'");
  EXPECT_NE(text.find("GGUF version 3"), std::string::npos) << text;
  EXPECT_NE(text.find("19 metadata entries"), std::string::npos);
  EXPECT_NE(text.find("\"llama\""), std::string::npos);
  EXPECT_NE(text.find("(504 more)"), std::string::npos);
  EXPECT_NE(text.find("48 tensors"), std::string::npos);
  EXPECT_NE(text.find("token_embd.weight"), std::string::npos);
  EXPECT_NE(text.find("[64, 512]"), std::string::npos);
}

TEST(InspectCommand, OddValuesStayValidJson) {
  gguf_test::TempDir dir;
  GgufWriter writer;
  writer.add_metadata("bad_utf8", GgufValue::of_string("a\xff"
                                                       "b"));
  writer.add_metadata("long", GgufValue::of_string(std::string(99, 'x') + "é tail"));
  writer.add_metadata("nan", GgufValue::of_f32(std::numeric_limits<float>::quiet_NaN()));
  writer.add_metadata(
      "nested",
      GgufValue::of_array(GgufType::ARRAY,
                          {GgufValue::of_array(GgufType::INT32, {GgufValue::of_i32(-3)})}));
  writer.write(dir.file("odd.gguf"));

  auto json = Json::parse(run_inspect("--json -m '" + dir.file("odd.gguf") + "'"));
  EXPECT_EQ(json["metadata"][0]["value"],
            "a\xef\xbf\xbd"
            "b");                                                 // U+FFFD
  EXPECT_EQ(json["metadata"][1]["value"], std::string(99, 'x'));  // not cut inside the é
  EXPECT_EQ(json["metadata"][1]["abbreviated"], true);
  EXPECT_TRUE(json["metadata"][2]["value"].is_null());
  EXPECT_EQ(json["metadata"][3]["value"], Json::parse("[[-3]]"));
  EXPECT_TRUE(json["tensors"].empty());

  std::string text = run_inspect("-m '" + dir.file("odd.gguf") + "'");
  EXPECT_NE(text.find("\"a\\xffb\""), std::string::npos) << text;
  EXPECT_NE(text.find("[[-3]]"), std::string::npos) << text;
}

// `make-model --type q4_k_m` through the CLI, then its mix as inspect shows it: 8 blocks,
// so llama.cpp's Q4_K_M keeps attn_v and ffn_down of blocks 0, 3, 6 and 7 at Q6_K (worked
// out by hand in weight_mix_test.cpp), the output at Q6_K, the norms at F32.
TEST(InspectCommand, ShowsTheMixOfALlamaCppQ4KMFile) {
  gguf_test::TempDir dir;
  const std::string path = dir.file("q4_k_m.gguf");
  CliResult made = run_cli("make-model --type q4_k_m --n-embd 256 --n-head 4 --n-head-kv 2 --n-ff 512 --n-layer 8 -o '" +
                           path + "' 2>&1");
  ASSERT_EQ(made.status, 0) << made.output;
  auto json = Json::parse(run_inspect("--json '" + path + "'"));
  const Json& mix = json["mix"];
  EXPECT_EQ(mix["file_type"], 15);
  EXPECT_EQ(mix["file_type_name"], "Q4_K_M");
  auto role = [&](const std::string& name) {
    for (const Json& r : mix["tensors"]) {
      if (r["name"] == name) return r["types"];
    }
    ADD_FAILURE() << "no " << name;
    return Json();
  };
  const Json promoted = {{"Q6_K", {{"tensors", 4}, {"blocks", {0, 3, 6, 7}}}},
                         {"Q4_K", {{"tensors", 4}, {"blocks", {1, 2, 4, 5}}}}};
  EXPECT_EQ(role("blk.*.attn_v.weight"), promoted);
  EXPECT_EQ(role("blk.*.ffn_down.weight"), promoted);
  const std::vector<int64_t> all_blocks = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(role("blk.*.attn_q.weight"), Json({{"Q4_K", {{"tensors", 8}, {"blocks", all_blocks}}}}));
  EXPECT_EQ(role("blk.*.attn_norm.weight"), Json({{"F32", {{"tensors", 8}, {"blocks", all_blocks}}}}));
  EXPECT_EQ(role("output.weight"), Json({{"Q6_K", {{"tensors", 1}, {"blocks", Json::array()}}}}));
  EXPECT_EQ(role("token_embd.weight"), Json({{"Q4_K", {{"tensors", 1}, {"blocks", Json::array()}}}}));
  EXPECT_EQ(mix["tensors"].size(), 12u);  // token_embd, output_norm, output and 9 per block
  EXPECT_EQ(json["totals"]["by_type"]["Q6_K"]["tensors"], 9);
  EXPECT_EQ(json["totals"]["by_type"]["Q4_K"]["tensors"], 1 + 8 * 7 - 8);

  std::string text = run_inspect("'" + path + "'");
  EXPECT_NE(text.find("mix (general.file_type 15: Q4_K_M):"), std::string::npos) << text;
  EXPECT_NE(text.find("Q6_K in blocks 0, 3, 6, 7; Q4_K in blocks 1, 2, 4, 5"), std::string::npos) << text;
}

TEST(InspectCommand, MakeModelRefusesAnUnknownTypeByName) {
  gguf_test::TempDir dir;
  CliResult result = run_cli("make-model --type q4_k_l -o '" + dir.file("x.gguf") + "' 2>&1");
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.output.find("unknown weight type 'q4_k_l'"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("Q4_K_M, Q5_K_M, Q6_K"), std::string::npos) << result.output;
}

TEST(InspectCommand, DefaultsToTheEmbeddedModel) {
  auto json = Json::parse(run_inspect("--json"));
  EXPECT_EQ(json["tensors"].size(), 48u);
}

TEST(InspectCommand, MissingFileIsAnError) {
  CliResult result = run_cli("inspect -m /nonexistent/model.gguf 2>&1");
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.output.find("error: cannot open '/nonexistent/model.gguf'"), std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace deferkv
