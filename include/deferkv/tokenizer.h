#pragma once
// Text <-> token ids, giving exactly the ids of the model's own tokenizer.
//
// Two families are supported, read from GGUF metadata or from Hugging Face files:
//  * SentencePiece-style BPE (GGUF `tokenizer.ggml.model` = "llama": Llama-2, Mistral,
//    phi-3, stories260K): pieces merged by score, spaces written as U+2581, one space
//    put before the text (and after each special token), unknown characters as byte
//    tokens <0xXX>.
//  * Byte-level BPE (`gpt2`: Llama-3, Qwen2/3, GPT-2, DeepSeek, Falcon, StarCoder ...):
//    the text is split by the pre-tokenizer regexes named by `tokenizer.ggml.pre`, each
//    piece is spelt in the GPT-2 byte alphabet and merged by merge rank.
//
// Invalid UTF-8 input is never an error: each maximal ill-formed subpart (Unicode's
// "substitution of maximal subparts", as Python's errors="replace") is replaced by U+FFFD
// before tokenizing, so such text decodes back to its repaired form.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deferkv {

class GgufFile;

// Token types, numbered as GGUF's `tokenizer.ggml.token_type`.
enum class TokenKind : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, <|eot_id|>, <|im_start|> ...: never produced from plain text
  kUserDefined = 4,  // added tokens: always matched as a whole in the text
  kUnused = 5,
  kByte = 6,  // <0x41>: SentencePiece byte fallback
};

// For Hugging Face files, which do not always say how to split text before BPE.
struct TokenizerOptions {
  // A `tokenizer.ggml.pre` name ("llama-bpe", "qwen2", "gpt-2" ...) that replaces the
  // pre-tokenizer the files describe. Needed for vocab.json/encoder.json files whose
  // tokenizer_config.json does not name a known tokenizer class.
  std::string pre;
};

class Tokenizer {
 public:
  // Error naming the missing key or the unsupported model / pre-tokenizer.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  // A .gguf file, a tokenizer.json, or a folder holding tokenizer.json, vocab.json +
  // merges.txt, or encoder.json + vocab.bpe (tokenizer_config.json beside them is read
  // for special tokens, BOS/EOS rules and the chat template).
  static std::unique_ptr<Tokenizer> from_path(const std::string& path,
                                              const TokenizerOptions& options = {});
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: put BOS / EOS around the ids as the vocabulary asks (add_bos_token,
  // add_eos_token). parse_special: text such as "<|im_start|>" becomes that control
  // token; without it only user-defined tokens are matched and control-token text is
  // tokenized as ordinary text.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes a token stands for: byte tokens give that byte, U+2581 gives ' ', a
  // byte-level token its bytes, control tokens their text. May be part of a character.
  std::string token_piece(int32_t id) const;
  // The pieces joined; for SentencePiece vocabularies the space put before the text by
  // encode() is taken off the first text token again, so decode(encode(s)) == s.
  std::string decode(const std::vector<int32_t>& ids) const;
  // Whether encode() puts a space before the text (SentencePiece's dummy prefix), which
  // decode() and a new text's StreamingDecoder take off the first text token again.
  bool adds_space_prefix() const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 when the vocabulary has none
  int32_t eos_id() const;
  bool is_end_of_generation(int32_t id) const;  // eos, eot, eom, <|im_end|>, <|end|> ...
  TokenKind token_kind(int32_t id) const;
  const std::string& token_text(int32_t id) const;  // as the vocabulary spells it
  int32_t find_token(std::string_view text) const;  // by vocabulary spelling; -1 if none

  // "llama" (SentencePiece) or "gpt2" (byte-level), and the pre-tokenizer name.
  const std::string& model_name() const;
  const std::string& pre_name() const;
  // The Jinja chat template the files carry ("" when none).
  const std::string& chat_template() const;

 private:
  struct Impl;  // src/tokenizer/tokenizer_impl.h
  friend class StreamingDecoder;
  explicit Tokenizer(std::unique_ptr<const Impl> impl);
  std::unique_ptr<const Impl> impl_;
};

// Detokenizes one token at a time for printing while generating: bytes of a character
// split over several tokens are held until the character is complete, so every piece
// returned is valid UTF-8. Bytes that can never form a character come out as U+FFFD.
// When decode(ids) is valid UTF-8, the pushes and finish() together return exactly it.
//
// `start`: kNewText drops the space SentencePiece puts before the first word, as decode()
// does (a prediction scored on its own); kContinuation keeps it, for tokens that continue
// a prompt ("The little dog" + " was"), as llama.cpp prints them.
enum class DecodeStart { kNewText, kContinuation };

class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, DecodeStart start = DecodeStart::kNewText);
  std::string push(int32_t id);
  // Whatever is still held (an unfinished character becomes U+FFFD); resets.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  std::string held_;
  DecodeStart start_;
  bool at_start_;
};

}  // namespace deferkv
