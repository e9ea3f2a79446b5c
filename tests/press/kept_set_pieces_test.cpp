// Which entries kvpress's wrappers keep in deferkv's form, per layer and KV head, compared
// exactly with each rule (docs/methods/blocks_and_segments.md, decoding_ratio.md) evaluated
// in double precision on the reference forward's keys: block= (BlockPress), segment=
// (ChunkPress) and ratio_of=seen (CompressionRatioDecodingPress). KeyDiff is the scorer of
// the pieces because its score depends on the set it is given (the mean of the unit keys),
// so a piece scored with any other set shows.
//
// Mutants applied to the engine, run, seen failing, reverted (the tests that failed):
//   prompt_pieces.cpp scores each block alone, without the entries
//      kept so far (piece = the new block only)                      -> KeyDiffInBlocks, SinksStayOutsideThePieces
//   prompt_pieces.cpp scores each segment with every candidate
//      before it (piece = [sinks, end))                              -> KeyDiffInSegments,
//                                                                       SinksCountInTheFirstSegment
//   prompt_pieces.cpp's segment share without max(1, .)               -> KeyDiffInSegments
//   prompt_pieces.cpp's first segment keeps its share besides the
//      sinks (keep = share, not share - sinks)                       -> SinksCountInTheFirstSegment
//   scored_press.cpp's budget_at counts the prompt's tokens at a
//      decode step too (seen = prompt_end())                         -> KNormToARatioOfEveryTokenSeen
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "deferkv/error.h"
#include "model/reference_forward.h"
#include "press/kept_set_reference.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

using testing::AttentionShape;
using testing::Positions;
using testing::ReferenceTrace;
using testing::Scores;
using testing::span;
using testing::united;

constexpr int64_t kPrompt = 160, kLayers = 4, kDim = 16;
const AttentionShape kShape = testing::kKeptSetShape;

using Kept = std::vector<std::vector<Positions>>;  // [layer][KV head]

std::string model_path() { return testing::kept_set_model_path(); }
const std::vector<int32_t>& prompt() {
  static const std::vector<int32_t> p = testing::distinct_prompt(kPrompt);
  return p;
}
const ReferenceTrace& trace() { return testing::kept_set_trace(kPrompt); }

// KeyDiff over the entries `held` of KV head g (positions): -cos(k_j, a), a the mean of
// their unit keys, one score per held entry.
Scores keydiff_of(const ReferenceTrace& t, int64_t l, int64_t g, const Positions& held) {
  std::vector<double> anchor(kDim, 0.0);
  for (int32_t p : held) {
    const double n = testing::key_norm(t, kShape, l, g, p);
    for (int64_t i = 0; i < kDim; ++i) anchor[i] += t.keys[l][p][g * kDim + i] / n / static_cast<double>(held.size());
  }
  double anchor_norm = 0;
  for (double a : anchor) anchor_norm += a * a;
  anchor_norm = std::sqrt(anchor_norm);
  Scores s;
  for (int32_t p : held) {
    double dot = 0;
    for (int64_t i = 0; i < kDim; ++i) dot += t.keys[l][p][g * kDim + i] * anchor[i];
    s.push_back(-dot / (testing::key_norm(t, kShape, l, g, p) * anchor_norm));
  }
  return s;
}

// The entries of `held` at `indices`.
Positions pick(const Positions& held, const Positions& indices) {
  Positions out;
  for (int32_t i : indices) out.push_back(held[i]);
  return out;
}

void expect_kept(const testing::PressRun& run, const Kept& expected) {
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      EXPECT_EQ(run.positions[l][g], expected[l][g]) << "layer " << l << " KV head " << g;
    }
  }
}

TEST(KeptSetPieces, KeyDiffInBlocks) {
  // kvpress's BlockPress with a budget of b: the first b entries are kept to start with,
  // then each block of B is scored with them and the best b of the b + B stay.
  const int64_t b = 72;
  for (int64_t block : {32, 50}) {
    SCOPED_TRACE(block);
    Kept want(kLayers);
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
        Positions kept = span(0, b);
        for (int64_t i = b; i < kPrompt; i += block) {
          const Positions held = united(kept, span(i, std::min(i + block, kPrompt)));
          kept = pick(held, testing::best(keydiff_of(trace(), l, g, held), b));
        }
        want[l].push_back(united(kept, span(kPrompt, kPrompt + 1)));  // the decode step's entry
      }
    }
    // Not what the whole prompt scored at once keeps: the blocks matter.
    const Positions whole = testing::best(keydiff_of(trace(), 3, 0, span(0, kPrompt)), b);
    EXPECT_NE(united(whole, span(kPrompt, kPrompt + 1)), want[3][0]);
    expect_kept(testing::run_press_on_model(model_path(), "keydiff:block=" + std::to_string(block),
                                            KvBudget::per_head(b), prompt(), 1),
                want);
  }
}

TEST(KeptSetPieces, KeyDiffInSegments) {
  // kvpress's ChunkPress at ratio r: each segment of S keeps max(1, int(n (1 - r))) of its
  // n entries by the scores of the segment alone (64, 64, 32 -> 32, 32, 16 at r = 0.5; the
  // last of 53, 53, 53, 1 at r = 0.7 keeps its one entry).
  for (const auto& [segment, ratio] : {std::pair<int64_t, double>{64, 0.5}, {48, 0.7}, {53, 0.7}}) {
    SCOPED_TRACE(segment);
    Kept want(kLayers);
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
        Positions kept;
        for (int64_t i = 0; i < kPrompt; i += segment) {
          const Positions held = span(i, std::min(i + segment, kPrompt));
          const auto share = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(held.size()) * (1 - ratio)));
          kept = united(kept, pick(held, testing::best(keydiff_of(trace(), l, g, held), share)));
        }
        want[l].push_back(united(kept, span(kPrompt, kPrompt + 1)));
      }
    }
    expect_kept(testing::run_press_on_model(model_path(), "keydiff:segment=" + std::to_string(segment),
                                            KvBudget::ratio(ratio), prompt(), 1),
                want);
  }
}

TEST(KeptSetPieces, SinksStayOutsideThePieces) {
  // StreamingLLM's recency in blocks keeps what it keeps at once: the sinks and the newest.
  const auto blocks = testing::run_press_on_model(model_path(), "streaming_llm:block=16", KvBudget::per_head(40),
                                                  prompt(), 1);
  const Positions want = united(span(0, 4), span(kPrompt - 36, kPrompt + 1));
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) EXPECT_EQ(blocks.positions[l][g], want);
  }
}

TEST(KeptSetPieces, SinksCountInTheFirstSegment) {
  // StreamingLLM in segments of 40 at r = 0.5: each keeps its 20 newest, the first segment
  // its 4 sinks and its 16 newest.
  const auto segments = testing::run_press_on_model(model_path(), "streaming_llm:segment=40", KvBudget::ratio(0.5),
                                                    prompt(), 1);
  Positions want = span(0, 4);
  for (int64_t end : {40, 80, 120, 160}) want = united(want, span(end - (end == 40 ? 16 : 20), end));
  want = united(want, span(kPrompt, kPrompt + 1));
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) EXPECT_EQ(segments.positions[l][g], want);
  }
}

TEST(KeptSetPieces, KNormToARatioOfEveryTokenSeen) {
  // every=2 at r = 0.25: the prefill keeps int(160 * 0.75) = 120 smallest key norms per
  // head; after step 2 every token seen is 162, so each head keeps int(162 * 0.75) = 121
  // of the 122 it holds (ratio_of=prompt would keep 120).
  const double r = 0.25;
  const auto run =
      testing::run_press_on_model(model_path(), "knorm:every=2,ratio_of=seen", KvBudget::ratio(r), prompt(), 2);
  Kept after_prefill(kLayers);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      Scores s;
      for (int64_t j = 0; j < kPrompt; ++j) s.push_back(-testing::key_norm(trace(), kShape, l, g, j));
      after_prefill[l].push_back(testing::best(s, 120));
    }
  }
  std::vector<int32_t> tokens = prompt();
  tokens.insert(tokens.end(), run.generated.begin(), run.generated.begin() + 2);
  const testing::KeyVisibility visible = [&](int64_t l, int64_t g, int64_t key, int64_t query) {
    if (query < kPrompt || key >= kPrompt) return true;
    const Positions& kept = after_prefill[l][g];
    return std::binary_search(kept.begin(), kept.end(), static_cast<int32_t>(key));
  };
  const ReferenceTrace seen = testing::reference_trace(model_path(), tokens, visible);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t g = 0; g < kShape.n_head_kv; ++g) {
      const Positions held = united(after_prefill[l][g], span(kPrompt, kPrompt + 2));
      Scores s;
      for (int32_t p : held) s.push_back(-testing::key_norm(seen, kShape, l, g, p));
      EXPECT_EQ(run.positions[l][g], pick(held, testing::best(s, 121))) << "layer " << l << " KV head " << g;
    }
  }
}

// The refusals, each naming the problem.
void expect_refused(const std::string& spec, const KvBudget& budget, const std::string& says) {
  SCOPED_TRACE(spec);
  try {
    make_press(spec, budget);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(KeptSetPieces, RefusedWhereTheyCannotApply) {
  const KvBudget b = KvBudget::per_head(64), r = KvBudget::ratio(0.5);
  expect_refused("snapkv:block=128", b, "its score reads the prompt's queries or attention");
  expect_refused("expected_attention:segment=64", r, "cannot take segment=");
  expect_refused("knorm:block=32,segment=64", r, "choose one");
  expect_refused("knorm:segment=64", b, "give --kv-ratio");
  expect_refused("knorm:block=32,alloc=adakv", b, "alloc other than uniform");
  expect_refused("keydiff:block=32,every=4", b, "cannot take d, per_step or every");
  expect_refused("knorm:ratio_of=seen", r, "needs every=N or per_step=true");
  expect_refused("knorm:ratio_of=seen,every=8", b, "give --kv-ratio");
  expect_refused("knorm:ratio_of=all,every=8", r, "is not one of: prompt, seen");
}

TEST(KeptSetPieces, ComposeAsTheirTriggerSays) {
  // Pieces evict the prompt once at the prefill's end, as the scorer alone: it joins a press
  // of the generated tokens. ratio_of=seen is a per-step trigger: it evicts both regions, so
  // a prompt press beside it is refused, naming both.
  const KvBudget r = KvBudget::ratio(0.5);
  EXPECT_NO_THROW(make_press("keydiff:segment=32+moment_kv:decode_budget=8", r));
  EXPECT_NO_THROW(make_press("knorm:block=32+moment_kv:decode_budget=8", r));
  expect_refused("snapkv+knorm:every=4,ratio_of=seen", r, "'knorm:");
  expect_refused("knorm:every=4,ratio_of=seen+moment_kv:decode_budget=8", r, "'moment_kv:");
}

}  // namespace
}  // namespace deferkv
