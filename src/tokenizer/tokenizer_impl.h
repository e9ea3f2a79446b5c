#pragma once
// The state behind deferkv::Tokenizer, built once from what a loader read.
#include <memory>
#include <string>
#include <vector>

#include "deferkv/tokenizer.h"
#include "tokenizer/byte_level_model.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer_spec.h"

namespace deferkv {

struct Tokenizer::Impl {
  explicit Impl(TokenizerSpec spec);

  // Error naming the id when it is outside the vocabulary.
  void check(int32_t id) const;
  // Appends the piece of `id` to `out`. `at_start` stays true until the first token
  // that is not a control token; for a SentencePiece vocabulary that token loses the
  // space encode() put before the text.
  void append_piece(int32_t id, bool& at_start, std::string& out) const;

  TokenizerFamily family;
  std::string model_name;
  std::string pre_name;
  bool add_space_prefix;
  Vocab vocab;
  std::unique_ptr<SentencePieceModel> sentencepiece;  // one of these two
  std::unique_ptr<ByteLevelModel> byte_level;
  SpecialTokenMatcher with_control;  // parse_special
  SpecialTokenMatcher user_defined;  // otherwise
  std::vector<std::string> pieces;   // the bytes of every token
  std::vector<bool> end_of_generation;
};

}  // namespace deferkv
