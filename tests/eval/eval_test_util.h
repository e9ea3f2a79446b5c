#pragma once
// Shared by the evaluation tests: a generator over the Llama-2 vocabulary (a real
// 32000-token SentencePiece vocabulary, so lengths are those of a real model), small
// SQuAD / HotpotQA files in the official schema, and text helpers.
#include <fstream>
#include <string>
#include <string_view>

#include "deferkv/eval_tasks.h"
#include "tokenizer/tokenizer_test_util.h"

namespace deferkv::eval_test {

inline size_t count_of(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string_view::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

// Two SQuAD v2 articles: the first has an unanswerable question, which RULER skips.
inline std::string write_squad(const std::string& path) {
  std::ofstream(path) << R"({"version": "v2.0", "data": [
  {"title": "Normans", "paragraphs": [
    {"context": "The Normans gave their name to Normandy, a region in France.",
     "qas": [{"question": "In what country is Normandy located?", "id": "a", "is_impossible": false,
              "answers": [{"text": "France", "answer_start": 52}]},
             {"question": "Who gave their name to Paris?", "id": "b", "is_impossible": true,
              "answers": [], "plausible_answers": [{"text": "Normans", "answer_start": 4}]}]},
    {"context": "Rollo was the first ruler of Normandy in the tenth century.",
     "qas": [{"question": "Who was the first ruler of Normandy?", "id": "c", "is_impossible": false,
              "answers": [{"text": "Rollo", "answer_start": 0}, {"text": "Rollo", "answer_start": 0}]}]}]},
  {"title": "Moon", "paragraphs": [
    {"context": "The Moon orbits the Earth once every twenty-seven days.",
     "qas": [{"question": "What orbits the Earth?", "id": "d", "is_impossible": false,
              "answers": [{"text": "The Moon", "answer_start": 0}]}]}]}]})";
  return path;
}

inline std::string write_hotpotqa(const std::string& path) {
  std::ofstream(path) << R"([
  {"_id": "1", "question": "Which city is the capital of the country where the Seine flows?", "answer": "Paris",
   "type": "bridge", "level": "hard", "supporting_facts": [["Seine", 0], ["France", 0]],
   "context": [["Seine", ["The Seine is a river ", "in northern France."]],
               ["France", ["France is a country whose capital is Paris."]],
               ["Thames", ["The Thames flows through London."]]]},
  {"_id": "2", "question": "Is the Thames longer than the Seine?", "answer": "no",
   "type": "comparison", "level": "easy", "supporting_facts": [["Thames", 0]],
   "context": [["Thames", ["The Thames flows through London."]],
               ["Danube", ["The Danube crosses ten countries."]]]}])";
  return path;
}

}  // namespace deferkv::eval_test
