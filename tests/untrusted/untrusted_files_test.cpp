// Untrusted files: every reader refuses a file whose counts exceed what it holds, naming the
// field and the file, before it allocates from those counts. Each case runs under the
// allocation meter (allocation_meter.h) and is bounded by what a well-formed file of the same
// kind costs to read, plus a little: a count the reader trusted would cost far more (the
// 8,192,001 layers of the first case allocated 3.5 GB before the check).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "deferkv/compressed_context.h"
#include "deferkv/eval_longbench.h"
#include "deferkv/eval_sweep.h"
#include "eval/sweep/sample_log.h"
#include "deferkv/model.h"
#include "deferkv/press.h"
#include "deferkv/tokenizer.h"
#include "model/test_models.h"
#include "untrusted/crafted_models.h"
#include "press/core/compresskv_profile.h"
#include "press/methods/lookaheadkv/lookahead_weights.h"
#include "tensor/gguf_file.h"
#include "tensor/gguf_writer.h"
#include "tensor/safetensors_file.h"
#include "tensor/gguf_test_util.h"
#include "untrusted/allocation_meter.h"

namespace deferkv {
namespace {

namespace fs = std::filesystem;
using gguf_test::GgufBytes;
using gguf_test::TempDir;
using testing::metered;
using testing::Metered;

constexpr int64_t kMiB = int64_t{1} << 20;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// The error names every fragment, and the reader held at most `bound` bytes on the way.
void expect_refused(const Metered& m, std::initializer_list<std::string> fragments, int64_t bound) {
  ASSERT_FALSE(m.error.empty()) << "the file was accepted";
  for (const std::string& f : fragments) EXPECT_NE(m.error.find(f), std::string::npos) << f << " not in: " << m.error;
  EXPECT_LE(m.peak_bytes, bound) << "peak " << m.peak_bytes << " bytes before: " << m.error;
}

class UntrustedFiles : public ::testing::Test {
 protected:
  TempDir dir;
};

// The issue's two files: a 2-layer model whose block_count says 8,192,001 (3.5 GB of layers
// were allocated before a tensor was looked for) or 4,294,967,280 ("std::bad_alloc").
TEST_F(UntrustedFiles, ModelLayerCountBeyondItsTensors) {
  for (Architecture arch : {Architecture::kLlama, Architecture::kQwen3}) {
    const RandomModelSpec spec = testing::two_layer_spec(arch);
    const std::string name = architecture_name(arch);
    const Metered normal = metered([&] { Model::load(testing::random_model_path(spec)); });
    ASSERT_TRUE(normal.error.empty()) << normal.error;
    const std::string key = name + ".block_count";
    const std::string many = testing::model_with_u32(spec, key, 8192001, dir.file(name + "-many.gguf"));
    expect_refused(metered([&] { Model::load(many); }), {name + ".block_count", "8192001", many},
                   normal.peak_bytes + kMiB);
    const std::string absurd = testing::model_with_u32(spec, key, 4294967280u, dir.file(name + "-absurd.gguf"));
    expect_refused(metered([&] { Model::load(absurd); }), {name + ".block_count", "out of range", absurd},
                   normal.peak_bytes + kMiB);
    // One layer more than the file has is refused by the tensor count (9 a layer) before
    // the missing layer is looked for.
    const std::string one_more = testing::model_with_u32(spec, key, 3, dir.file(name + "-three.gguf"));
    expect_refused(metered([&] { Model::load(one_more); }), {name + ".block_count", "tensors", one_more},
                   normal.peak_bytes + kMiB);
  }
}

// Head counts and sizes that would overflow the products of two of them are refused by name.
TEST_F(UntrustedFiles, ModelSizesBeyondThirtyOneBits) {
  const RandomModelSpec spec = testing::two_layer_spec(Architecture::kLlama);
  for (const std::string key : {"llama.attention.head_count", "llama.attention.key_length",
                                "llama.feed_forward_length", "llama.embedding_length"}) {
    const std::string path = testing::model_with_u32(spec, key, 4294967295u, dir.file("huge.gguf"));
    expect_refused(metered([&] { Model::load(path); }), {key, "out of range"}, 4 * kMiB);
  }
}

// GGUF metadata: arrays and strings whose lengths exceed the bytes left, and tensor tables
// longer than the file, are refused as they are read.
TEST_F(UntrustedFiles, GgufCountsBeyondTheFile) {
  const std::string path = dir.file("counts.gguf");
  const auto read = [&](const GgufBytes& bytes) {
    gguf_test::write_bytes(path, bytes.bytes());
    return metered([&] { GgufFile file(path); });
  };
  // A UINT8 array of 2^40 items (48 TB as values), a string array of 2^30 strings, a string
  // of 2^30 bytes, 2^40 tensors, 2^40 metadata entries: each in a file of under 100 bytes.
  GgufBytes array;
  array.header(3, 0, 1).str("big").u32(9).u32(0).u64(uint64_t{1} << 40).u8(1);
  expect_refused(read(array), {"'big'", "array elements", path}, kMiB);
  GgufBytes strings;
  strings.header(3, 0, 1).str("names").u32(9).u32(8).u64(uint64_t{1} << 30).str("a");
  expect_refused(read(strings), {"'names'", path}, kMiB);
  GgufBytes string;
  string.header(3, 0, 1).str("text").u32(8).u64(uint64_t{1} << 30).raw("abc", 3);
  expect_refused(read(string), {"string value", path}, kMiB);
  GgufBytes tensors;
  tensors.header(3, uint64_t{1} << 40, 0);
  expect_refused(read(tensors), {"tensor count", path}, kMiB);
  GgufBytes entries;
  entries.header(3, 0, uint64_t{1} << 40);
  expect_refused(read(entries), {"metadata count", path}, kMiB);
}

// safetensors: a header length beyond the file, and a tensor whose shape claims 2^60
// elements over a few bytes of data.
TEST_F(UntrustedFiles, SafetensorsCountsBeyondTheFile) {
  const std::string path = dir.file("model.safetensors");
  const auto write = [&](uint64_t header_bytes, const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((header_bytes >> (8 * i)) & 0xff);
    write_text(path, bytes + header + std::string(data_bytes, '\0'));
  };
  write(uint64_t{1} << 50, "{}", 0);
  expect_refused(metered([&] { SafetensorsFile f(path); }), {"header of", path}, kMiB);
  const std::string header = R"({"w": {"dtype": "F32", "shape": [1073741824, 1073741824], "data_offsets": [0, 16]}})";
  write(header.size(), header, 16);
  expect_refused(metered([&] { SafetensorsFile f(path); }), {"'w'", path}, kMiB);
}

// tokenizer.json: a token id of two billion in a vocabulary of three (the vocabulary is laid
// out by id, so a trusted id would allocate two billion entries).
TEST_F(UntrustedFiles, TokenizerIdsBeyondTheVocabulary) {
  const fs::path folder = dir.path() / "tok";
  fs::create_directories(folder);
  const nlohmann::json root = {
      {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2000000000}}}, {"merges", {"a b"}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}}};
  write_text((folder / "tokenizer.json").string(), root.dump());
  expect_refused(metered([&] { Tokenizer::from_path(folder.string(), {"gpt-2"}); }),
                 {"2000000000", "tokenizer.json"}, kMiB);
}

// LookaheadKV weights: a layer count the tensors cannot cover.
TEST_F(UntrustedFiles, LookaheadWeightsLayersBeyondTheirTensors) {
  GgufWriter w;
  w.add_metadata("general.architecture", GgufValue::of_string("lookaheadkv"));
  w.add_metadata("lookaheadkv.format_version", GgufValue::of_u32(1));
  w.add_metadata("lookaheadkv.base.architecture", GgufValue::of_string("llama"));
  w.add_metadata("lookaheadkv.base.n_embd", GgufValue::of_u32(8));
  w.add_metadata("lookaheadkv.base.n_layer", GgufValue::of_u32(4000));
  w.add_metadata("lookaheadkv.n_lookahead", GgufValue::of_u32(2));
  w.add_metadata("lookaheadkv.lora_rank", GgufValue::of_u32(1));
  w.add_metadata("lookaheadkv.lora_alpha", GgufValue::of_f32(1.0f));
  w.add_metadata("lookaheadkv.targets", GgufValue::of_array(GgufType::STRING, {GgufValue::of_string("q")}));
  const std::vector<float> embeddings(16, 0.0f);
  w.add_tensor("lookahead.embeddings", 0, {8, 2}, embeddings.data(), embeddings.size() * sizeof(float));
  const std::string path = dir.file("lookahead.gguf");
  w.write(path);
  expect_refused(metered([&] { load_lookahead_weights(path); }), {"n_layer", "4000", path}, kMiB);
}

// A CompressKV profile claiming a billion layers over two entries is refused without
// allocating for them.
TEST_F(UntrustedFiles, CompressKvProfileLayersBeyondItsEntries) {
  const std::string path = dir.file("profile.json");
  write_text(path, R"({"format": "deferkv-compresskv-profile/1", "model": {"name": "m", "n_layer": 1000000000,
                       "n_head": 4}, "retrieval_heads": [[0], [1]], "layer_scores": [1.0, 2.0]})");
  expect_refused(metered([&] { load_compresskv_profile(path); }), {"one entry per layer", path}, kMiB);
}

// Counts written as floats beyond 64 bits (found by fuzz_compresskv_profile: nlohmann's
// get<int64_t>() of 3.4e94 was undefined behaviour) are refused by name.
TEST_F(UntrustedFiles, CompressKvProfileNumbersThatAreNoWholeNumbers) {
  const std::string path = dir.file("profile.json");
  write_text(path, R"({"format": "deferkv-compresskv-profile/1", "model": {"name": "m", "n_layer": 3.4e94,
                       "n_head": 4}, "retrieval_heads": [[0]], "layer_scores": [1.0]})");
  expect_refused(metered([&] { load_compresskv_profile(path); }), {"model.n_layer", "not a whole number", path}, kMiB);
  write_text(path, R"({"format": "deferkv-compresskv-profile/1", "model": {"name": "m", "n_layer": 1,
                       "n_head": 4}, "retrieval_heads": [[1e300]], "layer_scores": [1.0]})");
  expect_refused(metered([&] { load_compresskv_profile(path); }), {"retrieval_heads", "not a whole number"}, kMiB);
}

// The per-model files of qfilter and expected_attention (safetensors): tensors whose shapes
// claim 2^60 values over 16 bytes are refused, naming the file and the tensor, before a value
// is converted; so is a query_cov that does not match query_mean (without that check, seen
// failing: the file was accepted).
TEST_F(UntrustedFiles, PerModelPressFilesWithCountsBeyondTheFile) {
  const std::string path = dir.file("model.safetensors");
  const auto write = [&](const std::string& header) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    write_text(path, bytes + header + std::string(16, '\0'));
  };
  write(R"({"q_filters": {"dtype": "F32", "shape": [1048576, 1048576, 1048576], "data_offsets": [0, 16]}})");
  expect_refused(metered([&] { make_press("qfilter:filters=" + path, KvBudget::per_head(8)); }), {"'q_filters'", path},
                 kMiB);
  // The folder form reads the same file.
  expect_refused(metered([&] { make_press("qfilter:filters=" + dir.path().string(), KvBudget::per_head(8)); }),
                 {"'q_filters'", path}, kMiB);
  write(R"({"query_mean": {"dtype": "F32", "shape": [1, 1, 2], "data_offsets": [0, 8]},
            "query_cov": {"dtype": "F32", "shape": [1, 1, 1073741824, 1073741824], "data_offsets": [8, 16]}})");
  expect_refused(metered([&] { make_press("expected_attention:stats=" + path, KvBudget::per_head(8)); }),
                 {"'query_cov'", path}, kMiB);
  write(R"({"query_mean": {"dtype": "F32", "shape": [1, 1, 2], "data_offsets": [0, 8]},
            "query_cov": {"dtype": "F32", "shape": [1, 1, 2, 1], "data_offsets": [8, 16]}})");
  expect_refused(metered([&] { make_press("expected_attention:stats=" + path, KvBudget::per_head(8)); }),
                 {"query_cov", "[1, 1, 2, 1]", path}, kMiB);
}

// LongBench's files: a dataset2maxlen whose length does not fit the tokens, and a JSONL line
// of the wrong shape, each named.
TEST_F(UntrustedFiles, LongBenchFilesOfTheWrongShape) {
  const fs::path folder = dir.path() / "longbench";
  fs::create_directories(folder);
  write_text((folder / "dataset2prompt.json").string(), R"({"qasper": "{context} {input}"})");
  write_text((folder / "dataset2maxlen.json").string(), R"({"qasper": 1e300})");
  expect_refused(metered([&] { eval::LongBenchConfig::load(folder.string()); }), {"dataset2maxlen.json", "qasper"}, kMiB);
  const std::string jsonl = (folder / "qasper.jsonl").string();
  write_text(jsonl, R"({"input": "q", "context": ["not", "a", "string"], "answers": ["a"], "length": 3})" "\n");
  expect_refused(metered([&] { eval::read_longbench_file(jsonl); }), {"qasper.jsonl"}, kMiB);
  write_text(jsonl, R"({"input": "q", "context": "c", "answers": ["a"], "length": 1e300, "dataset": "qasper",)"
                    R"( "language": "en", "all_classes": null, "_id": "x"})" "\n");
  expect_refused(metered([&] { eval::read_longbench_file(jsonl); }), {"qasper.jsonl", "'length'", "whole number"}, kMiB);
}

// A results folder's files (ours, but edited by hand or cut by a crash): a samples or failures
// record whose row id is a float out of int64's range, or that lacks a field the summary
// reads, is refused naming the file, line and field; before this check the first was
// undefined behaviour (get<int64_t>() of 1e300) and the second read a missing key of a const
// object. config.json's sweep counts are read as whole numbers the same way.
TEST_F(UntrustedFiles, ResultsFolderRecordsOfTheWrongShape) {
  const std::string samples = dir.file("samples.jsonl");
  const std::string good = R"({"method_params": "snapkv@64", "task": "niah_single_1", "length": 4096, "index": 0,)"
                           R"( "score": 100.0, "prompt_tokens": 4000, "prefill_seconds": 1.5,)"
                           R"( "decode_tokens_per_second": 20.0, "capture_seconds": 0.01, "eviction_seconds": 0.02,)"
                           R"( "kv_bytes_after_eviction": null, "peak_kv_bytes": 1000})";
  write_text(samples, good + "\n");
  ASSERT_EQ(eval::SampleLog::read(samples).size(), 1u);

  const auto refused = [&](const std::string& line, std::initializer_list<std::string> fragments,
                           eval::RecordKind kind = eval::RecordKind::kSample) {
    // A samples file's bad line follows a good one; a failures file holds the bad line alone.
    write_text(samples, (kind == eval::RecordKind::kSample ? good + "\n" : std::string()) + line + "\n");
    expect_refused(metered([&] { eval::SampleLog::read(samples, kind); }), fragments, kMiB);
  };
  std::string wrong = good;
  wrong.replace(wrong.find("4096"), 4, "1e300");
  refused(wrong, {samples + ":2", "\"length\"", "whole number"});
  wrong = good;
  const std::string score_field = "\"score\": 100.0, ";
  wrong.replace(wrong.find(score_field), score_field.size(), "");
  refused(wrong, {samples + ":2", "no \"score\""});
  wrong = good;
  wrong.replace(wrong.find("1000}"), 4, "-5");
  refused(wrong, {samples + ":2", "\"peak_kv_bytes\""});
  refused(R"({"method_params": "full", "length": 4096, "depth": "half", "error": "boom"})", {samples + ":1", "\"depth\"", "a number"},
          eval::RecordKind::kFailure);
  refused(R"({"method_params": "full", "dataset": "qasper", "index": 2})", {"no \"error\""}, eval::RecordKind::kFailure);

  nlohmann::ordered_json config = {{"benchmark", "ruler"},
                                   {"sweep", {{"tasks", {"niah_single_1"}}, {"lengths", {4096}}, {"samples", 2},
                                              {"methods", nlohmann::ordered_json::array()}}}};
  EXPECT_EQ(eval::plan_from_config(config).lengths, std::vector<int64_t>{4096});
  config["sweep"]["lengths"] = {1e300};
  expect_refused(metered([&] { eval::plan_from_config(config); }), {"sweep.lengths", "1e+300"}, kMiB);
  config["sweep"]["lengths"] = {4096};
  config["sweep"]["samples"] = 2.5;
  expect_refused(metered([&] { eval::plan_from_config(config); }), {"sweep.samples", "whole number"}, kMiB);
}

// A compressed context (docs/compressed_context.md) whose counts exceed its bytes, each with
// a valid header and checksum so that the reader gets past them to the count.
struct Payload {
  std::string bytes;
  template <typename T>
  Payload& put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Payload& str(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    bytes += s;
    return *this;
  }
};

TEST_F(UntrustedFiles, CompressedContextCountsBeyondTheFile) {
  const auto start = [](uint32_t n_layer, uint32_t n_head_kv, const std::string& press = "full", uint8_t mode = 0) {
    Payload p;
    p.str(std::string(64, 'a')).str(press).str("f16").str("f16").put(mode);
    p.put(n_layer).put(n_head_kv).put(uint32_t{8}).put(int64_t{2});
    return p;
  };
  const auto file = [&](const std::string& name, const std::string& payload, uint32_t version = 1) {
    std::string out("DKVCTX\r\n", 8);
    Payload h;
    h.put(version).put(uint32_t{0}).put(static_cast<uint64_t>(payload.size()));
    out += h.bytes + sha256_hex(payload) + payload;
    const std::string path = dir.file(name);
    write_text(path, out);
    return path;
  };
  const uint64_t huge = uint64_t{1} << 40;
  const std::string tokens = file("tokens.dkvctx", start(1, 1).put(huge).bytes);
  expect_refused(metered([&] { CompressedContext::read(tokens); }), {"token count", "1099511627776", tokens}, kMiB);
  Payload two_tokens = start(65536, 65536).put(uint64_t{2}).put(int32_t{1}).put(int32_t{2});
  two_tokens.put(uint64_t{1}).put(0.5f);
  const std::string heads = file("heads.dkvctx", two_tokens.bytes);
  expect_refused(metered([&] { CompressedContext::read(heads); }), {"4294967296 heads", heads}, kMiB);
  Payload one_head = start(1, 1).put(uint64_t{2}).put(int32_t{1}).put(int32_t{2});
  one_head.put(uint64_t{1}).put(0.5f).put(huge).put(uint32_t{0});
  const std::string entries = file("entries.dkvctx", one_head.bytes);
  expect_refused(metered([&] { CompressedContext::read(entries); }), {"entry count", "1099511627776", entries}, kMiB);
  // A deferred context (version 2): its head's score count beyond the file.
  Payload deferred = start(1, 1, "deferkv", 2).put(uint64_t{2}).put(int32_t{1}).put(int32_t{2});
  deferred.put(uint64_t{1}).put(0.5f).put(uint64_t{0}).put(uint32_t{0});  // an empty head
  deferred.put(int64_t{1}).put(-1.0).put(int64_t{2}).put(huge);           // budget 1, T = 2, the count
  const std::string scores = file("scores.dkvctx", deferred.bytes, 2);
  expect_refused(metered([&] { CompressedContext::read(scores); }),
                 {"deferred score count", "1099511627776", scores}, kMiB);
}

}  // namespace
}  // namespace deferkv
