// The invalid-UTF-8 rule (each maximal ill-formed subpart becomes one U+FFFD before
// tokenizing) and round trips of random valid text through every vocabulary.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "deferkv/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/utf8_scan.h"

namespace deferkv::test {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(RepairUtf8, ReplacesEachMaximalIllFormedSubpart) {
  EXPECT_EQ(repair_utf8("plain ascii"), "plain ascii");
  EXPECT_EQ(repair_utf8("h\xC3\xA9llo"), "h\xC3\xA9llo");
  EXPECT_EQ(repair_utf8("a\xFF"
                        "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(repair_utf8("\xC0\xAF"), kFffd + kFffd);              // overlong: two subparts
  EXPECT_EQ(repair_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // a surrogate
  EXPECT_EQ(repair_utf8("\xF0\x9F\x98"), kFffd);                  // cut-off 4-byte character
  EXPECT_EQ(repair_utf8("\xE2\x82"
                        "x"),
            kFffd + "x");
  EXPECT_EQ(repair_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(repair_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(InvalidUtf8Input, IsTokenizedAsItsRepairAndNeverThrows) {
  for (const Tokenizer* t : {&llama_spm(), &gpt2(), &qwen2()}) {
    EXPECT_EQ(t->encode("ok\xFF\xFEok", false, false),
              t->encode("ok" + kFffd + kFffd + "ok", false, false));
    EXPECT_EQ(t->encode("\xE2\x82", true, true), t->encode(kFffd, true, true));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (const Tokenizer* t : {&llama_spm(), &gpt2()}) {
      const auto ids = t->encode(bytes, false, false);
      EXPECT_EQ(t->decode(ids), repair_utf8(bytes));
    }
  }
}

// Random valid UTF-8 drawn mostly from the kinds of text the pre-tokenizers treat
// differently: ASCII words, digits, punctuation, whitespace runs, accented Latin,
// Cyrillic, CJK, Hangul, emoji, combining marks, and any code point at all.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::pair<uint32_t, uint32_t>> kRanges = {
      {'a', 'z'},         {'A', 'Z'},     {'0', '9'},       {' ', '/'},       {':', '@'},
      {'\t', '\r'},       {0xA0, 0xFF},   {0x400, 0x44F},   {0x4E00, 0x4F00}, {0xAC00, 0xAD00},
      {0x1F600, 0x1F64F}, {0x300, 0x36F}, {0x3000, 0x3002}, {0x1, 0x10FFFF}};
  std::string out;
  const int length = 1 + static_cast<int>(rng() % 30);
  for (int i = 0; i < length; ++i) {
    const auto& [lo, hi] = kRanges[rng() % kRanges.size()];
    uint32_t cp = lo + rng() % (hi - lo + 1);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = ' ';  // no surrogates
    if (cp == 0x2581) cp = '_';                  // SentencePiece's space mark reads as ' '
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

TEST(RoundTrip, BytesMissingFromTheAlphabetAreDropped) {
  // Falcon's byte alphabet lacks some control characters; like Hugging Face's and
  // llama.cpp's tokenizers, ours drops them (so such text cannot round-trip).
  EXPECT_EQ(cached_tokenizer("ggml-vocab-falcon.gguf").encode("a\vb", false, false),
            (std::vector<int32_t>{76, 77}));
}

// The bytes some token of `t` spells alone.
std::vector<bool> spellable_bytes(const Tokenizer& t) {
  std::vector<bool> spellable(256, false);
  for (int32_t id = 0; id < t.n_vocab(); ++id) {
    const std::string piece = t.token_piece(id);
    if (piece.size() == 1) spellable[static_cast<uint8_t>(piece[0])] = true;
  }
  return spellable;
}

// `text` without the bytes the vocabulary cannot spell: what a round trip can give back.
std::string spellable_only(const std::vector<bool>& spellable, const std::string& text) {
  std::string out;
  for (char c : text) {
    if (spellable[static_cast<uint8_t>(c)]) out += c;
  }
  return out;
}

TEST(RoundTrip, RandomValidUtf8DecodesBackInEveryVocabulary) {
  const std::vector<std::pair<std::string, std::string>> vocabs = {
      {"ggml-vocab-llama-spm.gguf", ""},
      {"ggml-vocab-phi-3.gguf", ""},
      {"ggml-vocab-gpt-2.gguf", ""},
      {"ggml-vocab-deepseek-coder.gguf", ""},
      {"ggml-vocab-deepseek-llm.gguf", ""},
      {"ggml-vocab-falcon.gguf", ""},
      {"ggml-vocab-starcoder.gguf", ""},
      {"ggml-vocab-mpt.gguf", ""},
      {"ggml-vocab-refact.gguf", ""},
      {"llama3.2-bpe", "llama-bpe"},
      {"qwen2", ""}};
  std::mt19937 rng(12345);
  for (const auto& [name, pre] : vocabs) {
    const Tokenizer& t = cached_tokenizer(name, pre);
    const std::vector<bool> spellable = spellable_bytes(t);
    for (int i = 0; i < 300; ++i) {
      const std::string text = random_text(rng);
      const auto ids = t.encode(text, false, false);
      ASSERT_EQ(t.decode(ids), spellable_only(spellable, text))
          << name << " text: " << testing::PrintToString(text)
          << " ids: " << testing::PrintToString(ids);
    }
  }
}

}  // namespace
}  // namespace deferkv::test
