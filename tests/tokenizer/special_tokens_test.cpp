// BOS/EOS insertion, special-token text in the input, token pieces and end-of-generation
// marks. Expected ids are llama.cpp's llama-tokenize output for the same vocabularies.
#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::test {
namespace {

using Ids = std::vector<int32_t>;

TEST(SpecialTokens, SentencePieceAddsBosAndParsesSpecialText) {
  const Tokenizer& t = llama_spm();
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.encode("Hello", true, false), (Ids{1, 15043}));
  EXPECT_EQ(t.encode("Hello", false, false), (Ids{15043}));
  EXPECT_EQ(t.encode("", true, false), (Ids{1}));
  EXPECT_EQ(t.encode("", false, false), Ids{});
  // After a special token the text gets its leading space again ("world" -> "▁world").
  EXPECT_EQ(t.encode("Hello <s>world</s>!", true, true), (Ids{1, 15043, 29871, 1, 3186, 2, 1738}));
  EXPECT_EQ(t.encode("Hello <s>world</s>!", true, false),
            (Ids{1, 15043, 529, 29879, 29958, 11526, 829, 29879, 29958, 29991}));
}

TEST(SpecialTokens, Phi3TokensSwallowTheWhitespaceAfterThem) {
  const Tokenizer& t = cached_tokenizer("ggml-vocab-phi-3.gguf");
  const std::string chat = "<|user|>\nHi there<|end|>\n<|assistant|>";
  EXPECT_EQ(t.encode(chat, true, true), (Ids{1, 32010, 6324, 727, 32007, 32001}));
  EXPECT_EQ(t.encode(chat, true, false),
            (Ids{1,   529,   29989, 1792, 29989, 29958, 13,  18567, 727,   29966, 29989,
                 355, 29989, 29958, 13,   29966, 29989, 465, 22137, 29989, 29958}));
  EXPECT_TRUE(t.is_end_of_generation(32007));  // <|end|>
  EXPECT_TRUE(t.is_end_of_generation(32000));  // <|endoftext|>, the eos
}

TEST(SpecialTokens, ChatmlControlTokensFromQwen2Files) {
  const Tokenizer& t = qwen2();
  const std::string turn = "<|im_start|>user\nHi<|im_end|>\n";
  EXPECT_EQ(t.encode(turn, true, true), (Ids{151644, 872, 198, 13048, 151645, 198}));
  EXPECT_EQ(t.encode(turn, true, false),
            (Ids{27, 91, 318, 4906, 91, 29, 872, 198, 13048, 27, 91, 318, 6213, 91, 397}));
  EXPECT_EQ(t.n_vocab(), 151646);
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_EQ(t.eos_id(), 151643);
  EXPECT_EQ(t.token_kind(151644), TokenKind::kControl);
  EXPECT_TRUE(t.is_end_of_generation(151645));
  EXPECT_TRUE(t.is_end_of_generation(151643));
  EXPECT_FALSE(t.is_end_of_generation(872));
  EXPECT_EQ(t.decode({151644, 872, 198, 13048, 151645}), "<|im_start|>user\nHi<|im_end|>");
}

TEST(SpecialTokens, Llama3FilesWithoutSpecialTokensAddNone) {
  const Tokenizer& t = llama3();
  EXPECT_EQ(t.model_name(), "gpt2");
  EXPECT_EQ(t.pre_name(), "llama-bpe");
  // encoder.json holds no special tokens, so there is no BOS to add (the GGUF test in
  // loaders_test.cpp has them).
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_EQ(t.encode("Hello world", true, false), (Ids{9906, 1917}));
}

TEST(TokenPieces, AreTheBytesTokensStandFor) {
  const Tokenizer& spm = llama_spm();
  EXPECT_EQ(spm.token_piece(15043), " Hello");  // "▁Hello"
  EXPECT_EQ(spm.token_piece(13), "\n");         // <0x0A>
  EXPECT_EQ(spm.token_piece(243), "\xF0");      // <0xF0>: a lone lead byte
  EXPECT_EQ(spm.token_piece(1), "<s>");
  EXPECT_EQ(spm.token_text(15043), "\xE2\x96\x81Hello");
  EXPECT_EQ(spm.find_token("\xE2\x96\x81Hello"), 15043);
  EXPECT_EQ(spm.find_token("no such token"), -1);
  EXPECT_EQ(spm.token_kind(13), TokenKind::kByte);

  const Tokenizer& bpe = gpt2();
  EXPECT_EQ(bpe.token_text(995), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(bpe.token_piece(995), " world");
  EXPECT_EQ(bpe.token_piece(50256), "<|endoftext|>");
}

TEST(TokenPieces, DecodeDropsOnlyTheAddedLeadingSpace) {
  const Tokenizer& t = llama_spm();
  EXPECT_EQ(t.decode(t.encode("Hello", true, false)), "<s>Hello");
  EXPECT_EQ(t.decode(t.encode(" Hello", false, false)), " Hello");
  EXPECT_EQ(t.decode({15043, 15043}), "Hello Hello");
}

TEST(TokenPieces, OutOfRangeIdsAreErrors) {
  EXPECT_THROW(llama_spm().token_piece(32000), Error);
  EXPECT_THROW(llama_spm().decode({1, -1}), Error);
  EXPECT_FALSE(llama_spm().is_end_of_generation(-5));
}

}  // namespace
}  // namespace deferkv::test
