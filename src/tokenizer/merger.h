#pragma once
// The BPE merge loop shared by both families: repeatedly merge the adjacent pair the
// table ranks best (leftmost on ties) until no adjacent pair can merge.
#include <cstdint>
#include <vector>

#include "tokenizer/merge_table.h"

namespace deferkv {

// One unit of a word: its token (-1 when its text is no token; it then never merges)
// and the bytes of the word it covers.
struct MergeSymbol {
  int32_t id;
  uint32_t start;
  uint32_t length;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

class Merger {
 public:
  // Merges `symbols` in place. On return the live symbols are a list from index 0
  // through `next` links (-1 ends it). prev/next are set here from the order given.
  void run(const MergeTable& table, std::vector<MergeSymbol>& symbols);

 private:
  struct Candidate {
    float priority;
    int32_t left;  // index of the left symbol
    int32_t left_id, right_id, result;
  };
  void consider(const MergeTable& table, const std::vector<MergeSymbol>& symbols, int32_t left);

  std::vector<Candidate> heap_;
};

}  // namespace deferkv
