// The streaming decoder holds the bytes of a character split over several tokens until
// the character is complete, and its output joined equals decode().
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "deferkv/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::test {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(StreamingDecoder, HoldsACharacterSplitOverByteTokens) {
  const Tokenizer& t = llama_spm();
  // "🦙" is not a Llama-2 piece: it falls back to its four byte tokens.
  const auto ids = t.encode("a\xF0\x9F\xA6\x99", false, false);
  ASSERT_EQ(ids, (std::vector<int32_t>{263, 243, 162, 169, 156}));
  StreamingDecoder stream(t);
  EXPECT_EQ(stream.push(ids[0]), "a");  // the leading space encode() added is dropped
  EXPECT_EQ(stream.push(ids[1]), "");
  EXPECT_EQ(stream.push(ids[2]), "");
  EXPECT_EQ(stream.push(ids[3]), "");
  EXPECT_EQ(stream.push(ids[4]), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(stream.finish(), "");
}

TEST(StreamingDecoder, HoldsPartialByteLevelTokens) {
  const Tokenizer& t = gpt2();
  const std::string text = " this is \xF0\x9F\xA6\x99.cpp";
  const auto ids = t.encode(text, false, false);
  StreamingDecoder stream(t);
  std::string joined;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    // Every piece handed out is whole characters.
    EXPECT_EQ(piece.find(kFffd), std::string::npos);
    joined += piece;
  }
  joined += stream.finish();
  EXPECT_EQ(joined, text);
}

TEST(StreamingDecoder, BrokenBytesBecomeReplacementCharacters) {
  const Tokenizer& t = llama_spm();
  StreamingDecoder stream(t);
  // <0xF0> <0x41>: a lead byte followed by no continuation byte.
  EXPECT_EQ(stream.push(243), "");
  EXPECT_EQ(stream.push(68), kFffd + "A");
  // A character still unfinished at the end.
  EXPECT_EQ(stream.push(243), "");
  EXPECT_EQ(stream.finish(), kFffd);
  // finish() resets: the next text token loses its added space again.
  EXPECT_EQ(stream.push(15043), "Hello");
}

TEST(StreamingDecoder, JoinedPiecesEqualDecodeOnEveryCase) {
  for (const auto& [vocab, cases_name] : {std::pair{"ggml-vocab-llama-spm.gguf", "llama-spm"},
                                          {"ggml-vocab-gpt-2.gguf", "gpt-2"},
                                          {"ggml-vocab-deepseek-llm.gguf", "deepseek-llm"}}) {
    const Tokenizer& t = cached_tokenizer(vocab);
    for (const std::string& text : read_vocab_cases(cases_name).texts) {
      const auto ids = t.encode(text, true, false);
      StreamingDecoder stream(t);
      std::string joined;
      for (int32_t id : ids) joined += stream.push(id);
      joined += stream.finish();
      EXPECT_EQ(joined, t.decode(ids)) << vocab << ": " << text;
    }
  }
}

}  // namespace
}  // namespace deferkv::test
