#pragma once
// RULER's QA sources read as its qa.py reads them:
//   SQuAD v2 dev: documents = the distinct paragraph contexts, sorted; one item per
//     answerable question (is_impossible false), in file order, whose gold document is
//     its paragraph and whose "same article" documents are the article's other paragraphs.
//   HotpotQA dev (distractor): documents = the distinct "title\n" + joined sentences of
//     every context paragraph, sorted; one item per question, whose gold documents are
//     all ten of its context paragraphs; the answer is the one answer string.
// Errors name the file: it cannot be read, is not JSON, or lacks a field the reader needs.
#include <cstdint>
#include <string>
#include <vector>

namespace deferkv::eval {

struct QaItem {
  std::string question;
  std::vector<std::string> answers;
  std::vector<int64_t> gold_docs;          // indices into QaDataset::docs
  std::vector<int64_t> same_article_docs;  // SQuAD only
};

struct QaDataset {
  std::string path;
  std::vector<std::string> docs;
  std::vector<QaItem> items;
};

QaDataset read_squad(const std::string& path);
QaDataset read_hotpotqa(const std::string& path);

}  // namespace deferkv::eval
