#include "tokenizer/pre_tokenizers.h"

#include <map>

#include <fmt/format.h>

#include "deferkv/error.h"

namespace deferkv {
namespace {

// GPT-2's ByteLevel regex (also RoBERTa's, MPT's, OLMo's).
constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// Llama-3: case-insensitive contractions, numbers in groups of up to three digits.
constexpr const char* kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen2/Qwen3: as Llama-3 but single digits.
constexpr const char* kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// DeepSeek's patterns, with code points escaped (\x{...}) because several of them
// (U+1F7D, U+2126, U+212A ...) are canonical singletons that Unicode normalization of
// the source text would silently replace.
constexpr const char* kDeepseekLetters =
    R"re(\s?[A-Za-z\x{00B5}\x{00C0}-\x{00D6}\x{00D8}-\x{00F6}\x{00F8}-\x{01BA})re"
    R"re(\x{01BC}-\x{01BF}\x{01C4}-\x{0293}\x{0295}-\x{02AF}\x{0370}-\x{0373}\x{0376})re"
    R"re(\x{0377}\x{037B}-\x{037D}\x{037F}\x{0386}\x{0388}-\x{038A}\x{038C})re"
    R"re(\x{038E}-\x{03A1}\x{03A3}-\x{03F5}\x{03F7}-\x{0481}\x{048A}-\x{052F})re"
    R"re(\x{0531}-\x{0556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD})re"
    R"re(\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77})re"
    R"re(\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45})re"
    R"re(\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})re"
    R"re(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})re"
    R"re(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})re"
    R"re(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D})re"
    R"re(\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139})re"
    R"re(\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B})re"
    R"re(\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})re"
    R"re(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E})re"
    R"re(\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A})re"
    R"re(\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB})re"
    R"re(\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
constexpr const char* kDeepseekPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";
// CJK plus the wide U+0800..U+4E00 range, isolated by both DeepSeek tokenizers.
constexpr const char* kDeepseekCjk =
    R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

const std::map<std::string, PreTokenizerConfig>& table() {
  static const auto configs = [] {
    std::map<std::string, PreTokenizerConfig> t;
    auto add = [&](std::vector<std::string> names, std::vector<std::string> patterns,
                   bool ignore_merges = false, bool add_bos = false) {
      for (const auto& name : names) t[name] = {name, patterns, ignore_merges, add_bos};
    };
    add({"gpt-2", "mpt", "olmo", "roberta-bpe", "jais"}, {kGpt2});
    add({"llama-bpe", "llama3", "llama-v3", "falcon3"}, {kLlama3}, true, true);
    add({"dbrx", "smaug-bpe"}, {kLlama3});
    add({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {kQwen2});
    add({"deepseek-llm"}, {R"re([\r\n])re", kDeepseekLetters, kDeepseekPunct, R"re(\s+$)re",
                           kDeepseekCjk, R"re(\p{N})re"});
    add({"deepseek-coder"},
        {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, R"re(\p{N})re"});
    // Falcon: runs of punctuation (HF Punctuation pre-tokenizer, which counts ASCII
    // symbols as punctuation), the GPT-2 regex, then numbers cut into threes.
    add({"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, R"re([0-9][0-9][0-9])re"});
    add({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
        {R"re(\p{N})re", kGpt2});
    // What llama.cpp applies to a byte-level vocabulary that names no pre-tokenizer.
    add({"default"},
        {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"});
    return t;
  }();
  return configs;
}

}  // namespace

PreTokenizerConfig pre_tokenizer_config(const std::string& name) {
  const auto it = table().find(name);
  if (it == table().end()) {
    fail("unknown pre-tokenizer '{}' (tokenizer.ggml.pre); known: {}", name,
         fmt::join(known_pre_tokenizers(), ", "));
  }
  return it->second;
}

std::vector<std::string> known_pre_tokenizers() {
  std::vector<std::string> names;
  for (const auto& [name, config] : table()) names.push_back(name);
  return names;
}

}  // namespace deferkv
