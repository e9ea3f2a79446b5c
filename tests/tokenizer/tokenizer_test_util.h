#pragma once
// Shared by the tokenizer tests: paths under tests/data/vocab, tokenizers loaded once
// per test binary (the big vocabularies take a while to read), and llama.cpp's
// test-tokenizer-0 case files.
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "deferkv/tokenizer.h"

namespace deferkv::test {

inline std::string vocab_path(const std::string& name) {
  return std::string(DEFERKV_TEST_DATA) + "/vocab/" + name;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

// `name` is a file or folder under tests/data/vocab; `pre` as TokenizerOptions::pre.
inline const Tokenizer& cached_tokenizer(const std::string& name, const std::string& pre = "") {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name + "|" + pre];
  if (!slot) slot = Tokenizer::from_path(vocab_path(name), {pre});
  return *slot;
}

inline const Tokenizer& llama_spm() { return cached_tokenizer("ggml-vocab-llama-spm.gguf"); }
inline const Tokenizer& gpt2() { return cached_tokenizer("ggml-vocab-gpt-2.gguf"); }
inline const Tokenizer& llama3() { return cached_tokenizer("llama3.2-bpe", "llama-bpe"); }
inline const Tokenizer& qwen2() { return cached_tokenizer("qwen2"); }

// A test-tokenizer-0 case file pair: `.inp` holds texts each followed by the line
// "__ggml_vocab_test__"; `.out` one line of space-separated ids per text (encoded with
// add_special=false, parse_special=false).
struct VocabCases {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
};

inline VocabCases read_vocab_cases(const std::string& vocab_name) {
  VocabCases cases;
  const std::string inp = read_file(vocab_path("ggml-vocab-" + vocab_name + ".gguf.inp"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0, next; (next = inp.find(separator, pos)) != std::string::npos;
       pos = next + separator.size()) {
    cases.texts.push_back(inp.substr(pos, next - pos));
  }
  std::istringstream out(read_file(vocab_path("ggml-vocab-" + vocab_name + ".gguf.out")));
  for (std::string line; std::getline(out, line);) {
    std::istringstream fields(line);
    std::vector<int32_t> ids;
    for (int32_t id; fields >> id;) ids.push_back(id);
    cases.ids.push_back(ids);
  }
  return cases;
}

}  // namespace deferkv::test
