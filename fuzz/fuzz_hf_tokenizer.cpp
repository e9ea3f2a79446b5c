// Hugging Face tokenizer files: tokenizer.json, vocab.json + merges.txt, encoder.json +
// vocab.bpe, each with an optional tokenizer_config.json beside it. The input is
//   <layout byte> <first file> NUL <second file> NUL <tokenizer_config.json>
// where layout % 3 picks tokenizer.json (its second field unused), vocab.json + merges.txt
// or encoder.json + vocab.bpe, and an empty config field writes no config. A tokenizer
// that loads then encodes a fixed text mixing scripts, digits and special-token text.
// Asserts: only deferkv::Error escapes; every id encode gives is inside the vocabulary
// and decodes (token_piece and decode agree with each other).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "deferkv/tokenizer.h"
#include "fuzz_support.h"

using namespace deferkv;

namespace {

constexpr std::array<const char*, 3> kFirst = {"tokenizer.json", "vocab.json", "encoder.json"};
constexpr std::array<const char*, 3> kSecond = {nullptr, "merges.txt", "vocab.bpe"};
constexpr std::string_view kText =
    "Hello  world, 1234567 don't <|im_start|>user\n\t\xC3\xBC\xE4\xB8\xAD\xF0\x9F\x98\x80 \xFF<s>";

void check_encoding(const Tokenizer& tokenizer, bool parse_special) {
  const auto ids = tokenizer.encode(kText, true, parse_special);
  // decode joins the pieces; a SentencePiece vocabulary that puts a space before the
  // text takes it off the first piece after the leading control tokens again.
  std::string joined, stripped;
  bool at_start = true;
  for (int32_t id : ids) {
    fuzz::require(id >= 0 && id < tokenizer.n_vocab(), "encoded ids lie inside the vocabulary");
    const std::string piece = tokenizer.token_piece(id);
    joined += piece;
    const bool strip = at_start && tokenizer.token_kind(id) != TokenKind::kControl;
    if (strip) at_start = false;
    stripped += strip && piece.starts_with(' ') ? piece.substr(1) : piece;
  }
  const std::string decoded = tokenizer.decode(ids);
  fuzz::require(decoded == joined || (tokenizer.model_name() == "llama" && decoded == stripped),
                "decode is the pieces joined");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  if (size == 0) return 0;
  const size_t layout = data[0] % 3;
  const auto fields = fuzz::split_fields(fuzz::as_text(data + 1, size - 1));
  for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "encoder.json", "vocab.bpe",
                           "tokenizer_config.json"}) {
    scratch.remove(name);
  }
  scratch.write(kFirst[layout], fields[0]);
  if (kSecond[layout] != nullptr) scratch.write(kSecond[layout], fields.size() > 1 ? fields[1] : "");
  if (fields.size() > 2 && !fields[2].empty()) scratch.write("tokenizer_config.json", fields[2]);
  // vocab.json + merges.txt name no pre-tokenizer; half the inputs give one.
  TokenizerOptions options;
  if (layout == 1 && (data[0] & 0x80) != 0) options.pre = "qwen2";
  fuzz::accepts([&] {
    const auto tokenizer = Tokenizer::from_path(scratch.path(), options);
    fuzz::accepts([&] { check_encoding(*tokenizer, false); });
    fuzz::accepts([&] { check_encoding(*tokenizer, true); });
  });
  return 0;
}
