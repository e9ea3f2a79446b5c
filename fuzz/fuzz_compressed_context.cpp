// Compressed context files (docs/compressed_context.md). Asserts: only deferkv::Error
// escapes; a context that reads is consistent (every head's rows and positions of its
// length, positions below n_past, tokens and logits present, a deferred one's scores), and writing it out and
// reading it back gives the same file, byte for byte.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "deferkv/compressed_context.h"
#include "engine/compressed_context_state.h"
#include "fuzz_support.h"
#include "tensor/dtype.h"

using namespace deferkv;

namespace {

void check_consistent(const CompressedContext& c) {
  const CompressedContext::State& s = c.state();
  const size_t heads = static_cast<size_t>(s.n_layer * s.n_head_kv);
  fuzz::require(s.kv.lengths.size() == heads && s.kv.keys.size() == heads && s.kv.values.size() == heads &&
                    s.kv.positions.size() == heads && s.kv.key_shifts.size() == heads,
                "one entry per head");
  const int64_t key_row = dtype_row_bytes(s.kv.types.keys, s.kv.head_dim);
  const int64_t value_row = dtype_row_bytes(s.kv.types.values, s.kv.head_dim);
  for (size_t i = 0; i < heads; ++i) {
    const int64_t n = s.kv.lengths[i];
    fuzz::require(static_cast<int64_t>(s.kv.positions[i].size()) == n, "a position per entry");
    fuzz::require(static_cast<int64_t>(s.kv.keys[i].size()) == n * key_row, "a key row per entry");
    fuzz::require(static_cast<int64_t>(s.kv.values[i].size()) == n * value_row, "a value row per entry");
    for (int32_t p : s.kv.positions[i]) fuzz::require(p >= 0 && p < c.n_past(), "positions below n_past");
  }
  if (const DeferredEviction* d = c.deferred()) {
    fuzz::require(c.mode() == ContextMode::kDeferred && d->positions.size() == heads && d->scores.size() == heads,
                  "a deferred context scores every head");
    for (size_t i = 0; i < heads; ++i) {
      fuzz::require(d->positions[i].size() == d->scores[i].size(), "a deferred score per position");
      for (int32_t p : d->positions[i]) fuzz::require(p >= 0 && p < c.n_past(), "deferred positions below n_past");
    }
  } else {
    fuzz::require(c.mode() != ContextMode::kDeferred, "a deferred context has its deferred section");
  }
  fuzz::require(!c.tokens().empty() && !s.logits.empty(), "tokens and logits");
  fuzz::require(c.n_past() >= 1 && c.n_past() <= static_cast<int64_t>(c.tokens().size()), "n_past within the tokens");
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  const std::string path = scratch.write("input.dkvctx", fuzz::as_text(data, size));
  std::shared_ptr<const CompressedContext> context;
  if (!fuzz::accepts([&] { context = CompressedContext::read(path); })) return 0;
  check_consistent(*context);
  const std::string copy = scratch.path() + "/copy.dkvctx";
  fuzz::require(fuzz::accepts([&] { context->save(copy); }), "a context that reads can be written");
  fuzz::require(contents(copy) == std::string(fuzz::as_text(data, size)), "written back byte for byte");
  return 0;
}
