#include <filesystem>

#include "deferkv/error.h"
#include "tokenizer/hf_common.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/loaders.h"

namespace deferkv {
namespace {

namespace fs = std::filesystem;

// Tokenizer classes of tokenizer_config.json whose pre-tokenizer is known.
std::string pre_for_class(const std::string& tokenizer_class) {
  if (tokenizer_class.starts_with("Qwen2Tokenizer")) return "qwen2";
  if (tokenizer_class.starts_with("GPT2Tokenizer") ||
      tokenizer_class.starts_with("RobertaTokenizer")) {
    return "gpt-2";
  }
  return "";
}

// vocab.json + merges.txt (or GPT-2's encoder.json + vocab.bpe): a byte-level BPE whose
// pre-tokenizer the files do not state, so it comes from the options, the tokenizer
// class, or (for GPT-2's original files) is GPT-2's.
TokenizerSpec read_vocab_and_merges(const std::string& vocab_path, const std::string& merges_path,
                                    const HfConfig& config, const TokenizerOptions& options,
                                    const std::string& default_pre) {
  const nlohmann::json vocab_json = read_json_file(vocab_path);
  if (!vocab_json.is_object()) fail("{}: expected a JSON object of token -> id", vocab_path);
  std::vector<std::pair<std::string, int32_t>> base;
  base.reserve(vocab_json.size());
  for (const auto& [text, id] : vocab_json.items()) {
    base.emplace_back(text, json_token_id(id, text, vocab_path));
  }

  TokenizerSpec spec;
  spec.family = TokenizerFamily::kByteLevel;
  spec.model_name = "gpt2";
  spec.vocab = layout_vocab(base, config.added_tokens, vocab_path);

  const std::string merges_text = read_text_file(merges_path);
  size_t start = 0;
  while (start < merges_text.size()) {
    size_t end = merges_text.find('\n', start);
    if (end == std::string::npos) end = merges_text.size();
    std::string line = merges_text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    spec.merges.push_back(split_merge(line, merges_path, spec.merges.size()));
  }

  std::string pre = options.pre;
  if (pre.empty()) pre = pre_for_class(config.tokenizer_class);
  if (pre.empty()) pre = default_pre;
  if (pre.empty()) {
    fail(
        "{}: cannot tell the pre-tokenizer (tokenizer_class '{}'); name one in the options "
        "(known: {})",
        vocab_path, config.tokenizer_class, fmt::join(known_pre_tokenizers(), ", "));
  }
  spec.pre = pre_tokenizer_config(pre);
  spec.vocab.add_bos = spec.pre.add_bos_by_default;
  apply_config(config, spec.vocab, vocab_path);
  return spec;
}

}  // namespace

TokenizerSpec read_hf_tokenizer(const std::string& path, const TokenizerOptions& options) {
  std::error_code error;
  const bool is_dir = fs::is_directory(path, error);
  if (!is_dir && !fs::is_regular_file(path, error)) fail("{}: no such file or folder", path);
  const fs::path dir = is_dir ? fs::path(path) : fs::path(path).parent_path();
  const auto file = [&](const char* name) { return (dir / name).string(); };
  const auto exists = [&](const char* name) { return fs::is_regular_file(dir / name, error); };

  HfConfig config;
  if (exists("tokenizer_config.json")) {
    config = read_tokenizer_config(file("tokenizer_config.json"));
  }

  if (!is_dir) {
    if (fs::path(path).extension() != ".json" ||
        fs::path(path).filename() == "tokenizer_config.json") {
      fail(
          "{}: expected a .gguf file, a tokenizer.json, or a folder of Hugging Face tokenizer "
          "files",
          path);
    }
    return read_tokenizer_json(path, config, options);
  }
  if (exists("tokenizer.json")) return read_tokenizer_json(file("tokenizer.json"), config, options);
  if (exists("vocab.json") && exists("merges.txt")) {
    return read_vocab_and_merges(file("vocab.json"), file("merges.txt"), config, options, "");
  }
  if (exists("encoder.json") && exists("vocab.bpe")) {
    return read_vocab_and_merges(file("encoder.json"), file("vocab.bpe"), config, options, "gpt-2");
  }
  fail("{}: found none of tokenizer.json, vocab.json + merges.txt, encoder.json + vocab.bpe", path);
}

}  // namespace deferkv
