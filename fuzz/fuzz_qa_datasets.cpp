// RULER's QA sources: the SQuAD v2 dev JSON (first byte even) or the HotpotQA dev JSON
// (odd), the rest being the file. Asserts: only deferkv::Error escapes; the documents
// are distinct and sorted, and every gold or same-article document index is inside them.
#include <algorithm>
#include <cstdint>
#include <string>

#include "eval/tasks/qa_datasets.h"
#include "fuzz_support.h"

using namespace deferkv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  if (size == 0) return 0;
  const bool squad = data[0] % 2 == 0;
  const std::string path = scratch.write("qa.json", fuzz::as_text(data + 1, size - 1));
  eval::QaDataset set;
  if (!fuzz::accepts([&] { set = squad ? eval::read_squad(path) : eval::read_hotpotqa(path); })) return 0;
  fuzz::require(std::adjacent_find(set.docs.begin(), set.docs.end(),
                                   [](const auto& a, const auto& b) { return !(a < b); }) == set.docs.end(),
                "documents are distinct and sorted");
  const auto n_docs = static_cast<int64_t>(set.docs.size());
  for (const eval::QaItem& item : set.items) {
    for (int64_t d : item.gold_docs) fuzz::require(d >= 0 && d < n_docs, "gold documents exist");
    for (int64_t d : item.same_article_docs) fuzz::require(d >= 0 && d < n_docs, "same-article documents exist");
  }
  return 0;
}
