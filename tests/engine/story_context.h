#pragma once
// The document the compressed-context tests compress and the questions their sessions read
// after it: stories260K (head_dim 8), whose real text gives real attention, with one short
// story and questions about it.
#include <initializer_list>
#include <memory>
#include <vector>

#include "deferkv/model.h"
#include "deferkv/tokenizer.h"
#include "model/test_models.h"

namespace deferkv::testing {

struct ContextSetup {
  std::shared_ptr<const Model> model;
  std::vector<int32_t> document;
  std::vector<std::vector<int32_t>> questions;
};

// The document with BOS; each question encoded alone, to be read after it.
inline ContextSetup story_context(std::initializer_list<const char*> questions) {
  ContextSetup s{Model::load(stories_model_path()), {}, {}};
  const Tokenizer& t = s.model->tokenizer();
  s.document = t.encode(
      "Once upon a time, there was a little girl named Lily. She loved to play in the park with her red ball. One "
      "day, she saw a big dog near the tree. The dog was brown and had a long tail. Lily was scared at first, but "
      "the dog wagged its tail and smiled. Lily threw the ball and the dog ran to get it. They played all day "
      "long. When the sun went down, Lily's mom called her home. Lily said goodbye to the dog and went home "
      "happy. The next day, she went back to the park, and the dog was there again, waiting for her by the tree.",
      true, false);
  for (const char* q : questions) s.questions.push_back(t.encode(q, false, false));
  return s;
}

}  // namespace deferkv::testing
