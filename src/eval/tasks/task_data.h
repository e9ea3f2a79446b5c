#pragma once
// The data files the generators read, each loaded on first use and kept:
//   ruler/PaulGrahamEssays.json   RULER's essay haystack. Its first 644051 bytes are the
//                                 49 essays of gkamradt/LLMTest_NeedleInAHaystack in file-name
//                                 order (RULER's builder puts them first), which is the
//                                 NIAH haystack, so one file serves both protocols.
//   ruler/wonderwords/*.txt       the noun, adjective and verb lists of `wonderwords`,
//                                 whole or split in two disjoint halves (WordSplit) so that
//                                 a model trained on the samples of one half can be tested
//                                 on keys it never saw.
//   SQuAD / HotpotQA JSON         at the paths the user gives (qa_1 / qa_2).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deferkv/eval_tasks.h"
#include "eval/tasks/qa_datasets.h"

namespace deferkv::eval {

class TaskData {
 public:
  TaskData(std::string data_dir, std::string squad_path, std::string hotpotqa_path,
           WordSplit word_split = WordSplit::kAll);

  // RULER's essay text, and its words: re.sub(r'\s+', ' ', text).split(' ').
  const std::string& essay_text() const;
  const std::vector<std::string>& essay_words() const;
  // The NIAH haystack: the 49 gkamradt essays concatenated in sorted file-name order.
  std::string_view niah_essays() const;

  // The wonderwords lists, one word a line (right-stripped), in file order; with a split,
  // only the words on even (kTrain) or odd (kHeldOut) line numbers, counted from 0.
  const std::vector<std::string>& nouns() const;
  const std::vector<std::string>& adjectives() const;
  const std::vector<std::string>& verbs() const;

  const QaDataset& squad() const;
  const QaDataset& hotpotqa() const;

 private:
  const std::vector<std::string>& word_list(std::optional<std::vector<std::string>>& slot,
                                            const char* file) const;

  std::string data_dir_, squad_path_, hotpotqa_path_;
  WordSplit word_split_;
  mutable std::optional<std::string> essay_text_;
  mutable std::optional<std::vector<std::string>> essay_words_, nouns_, adjectives_, verbs_;
  mutable std::optional<QaDataset> squad_, hotpotqa_;
};

}  // namespace deferkv::eval
