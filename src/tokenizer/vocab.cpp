#include "tokenizer/vocab.h"

namespace deferkv {

void Vocab::build_index() {
  ids.clear();
  ids.reserve(texts.size());
  for (int32_t id = 0; id < size(); ++id) {
    if (kinds[id] != TokenKind::kUnused) ids.emplace(texts[id], id);
  }
}

}  // namespace deferkv
