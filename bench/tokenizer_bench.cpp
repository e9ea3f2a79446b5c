// Tokenizer throughput: MB/s of text turned into ids, for the Llama-3 and Qwen2 byte-level
// vocabularies and the Llama-2 SentencePiece one (the files under tests/data/vocab).
// The text comes from DEFERKV_BENCH_TEXT, e.g.
//   DEFERKV_BENCH_TEXT=../shared/data/haystack/war-and-peace.txt ./deferkv_bench \
//     --benchmark_filter=Tokenize
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <benchmark/benchmark.h>

#include "deferkv/tokenizer.h"

namespace {

const std::string kVocab = std::string(DEFERKV_SOURCE_DIR) + "/tests/data/vocab/";

// The benchmark text, or "" with `why` set.
std::string bench_text(std::string& why) {
  const char* path = std::getenv("DEFERKV_BENCH_TEXT");
  if (path == nullptr) {
    why = "set DEFERKV_BENCH_TEXT to a text file, e.g. ../shared/data/haystack/war-and-peace.txt";
    return "";
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = std::string("cannot read DEFERKV_BENCH_TEXT=") + path;
    return "";
  }
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

void tokenize(benchmark::State& state, const std::string& path, const std::string& pre) {
  std::string why;
  const std::string text = bench_text(why);
  if (text.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const auto tokenizer = deferkv::Tokenizer::from_path(kVocab + path, {pre});
  size_t n_ids = 0;
  for (auto _ : state) {
    const auto ids = tokenizer->encode(text, true, false);
    n_ids = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_ids);
}

void BM_TokenizeLlama3(benchmark::State& state) { tokenize(state, "llama3.2-bpe", "llama-bpe"); }
void BM_TokenizeQwen2(benchmark::State& state) { tokenize(state, "qwen2", ""); }
void BM_TokenizeLlama2Spm(benchmark::State& state) {
  tokenize(state, "ggml-vocab-llama-spm.gguf", "");
}

BENCHMARK(BM_TokenizeLlama3)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_TokenizeQwen2)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_TokenizeLlama2Spm)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
