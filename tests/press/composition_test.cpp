// Composition "a+b" over every ordered pair of registered methods, on the embedded
// stories260K: a pair the rules of make_press allow runs with both presses taking effect
// (each one's budget holds in its own region; where the other press adds a region, the
// bytes held are below what the press alone holds, else the entries kept differ from
// its own); any other pair is refused when parsed, with an error naming both. Which
// pairs are allowed is written here from each method's own description, not read from
// the registry's roles.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "deferkv/session.h"
#include "deferkv/tokenizer.h"
#include "engine/session_internals.h"
#include "kv/kv_cache.h"
#include "model/test_models.h"
#include "press/lookahead_test_util.h"
#include "support/scratch_dir.h"
#include "tensor/safetensors_test_util.h"

namespace deferkv {
namespace {

// Prompt entries per KV head: the defaults' windows (32, and sinks 4) fit, and chunkkv's
// b - w holds one whole chunk of 10.
constexpr int64_t kBudget = 48;
constexpr int64_t kDecodeBudget = 4;   // moment_kv's generated entries per KV head
constexpr int64_t kDecode = 10;        // decode steps after the prompt

// What a method evicts, by its documentation: the prompt's entries, the generated ones
// (moment_kv), both (tova cuts every entry to b at each step by default), or nothing.
enum class Region { kNone, kPrompt, kGenerated, kBoth };

struct MethodCase {
  std::string spec;
  Region region;
  bool extra_forward;  // scores with forward passes of its own (lookahead, draft, rows, reconstruction)
  bool reads_cache_as_is = false;  // chooses from the entries held when it evicts
  bool once_at_prefill_end = true;  // its one eviction is at the end of the prefill
};

std::string stories_profile_path() {
  const std::string path = testing::scratch_file("composition-stories-compresskv.json");
  std::ofstream(path) << R"({"format": "deferkv-compresskv-profile/1",
    "model": {"name": "stories260K", "n_layer": 5, "n_head": 8},
    "retrieval_heads": [[0, 1], [2], [3, 4], [5], [6, 7]],
    "layer_scores": [0.3, 0.25, 0.2, 0.15, 0.1]})";
  return path;
}

std::string stories_lookahead_weights_path() {
  const std::string path = testing::scratch_file("composition-stories-lookahead.gguf");
  if (!std::filesystem::exists(path)) {
    save_lookahead_weights(path, testing::random_lookahead_weights(testing::model_shape(testing::stories_model_path()),
                                                                   6, 4, 0.2f, 17));
  }
  return path;
}

std::string stories_qfilters_path() {
  const std::string path = testing::scratch_file("composition-stories-qfilters.safetensors");
  const PressModelShape s = testing::model_shape(testing::stories_model_path());
  std::vector<float> f(static_cast<size_t>(s.n_layer * s.n_head_kv * s.head_dim));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (float& x : f) x = normal(rng);
  safetensors_test::write_safetensors(path, {}, {safetensors_test::f32_tensor("q_filters", {s.n_layer, s.n_head_kv, s.head_dim}, f)});
  return path;
}

// Every registered method with its defaults (and the files it needs).
std::map<std::string, MethodCase> method_cases() {
  std::map<std::string, MethodCase> cases = {
      {"full", {"full", Region::kNone, false}},
      {"streaming_llm", {"streaming_llm", Region::kPrompt, false, true}},
      {"h2o", {"h2o", Region::kPrompt, false}},
      {"tova", {"tova", Region::kBoth, false, true, false}},
      {"knorm", {"knorm", Region::kPrompt, false}},
      {"keydiff", {"keydiff", Region::kPrompt, false}},
      {"random", {"random", Region::kPrompt, false}},
      {"lagkv", {"lagkv:lag=8", Region::kPrompt, false}},
      {"leverage", {"leverage", Region::kPrompt, false}},
      {"cur", {"cur", Region::kPrompt, false}},
      {"non_causal_attention", {"non_causal_attention", Region::kPrompt, false}},
      {"compactor", {"compactor", Region::kPrompt, false}},
      // Neither reads the budget: every layer lazy and every head streaming keep 4 + 39 and 4 + 40 of b = 48.
      {"simlayerkv", {"simlayerkv:lazy_threshold=0,n_recent=40", Region::kPrompt, false}},
      {"duo_attention", {"duo_attention:head_compression_ratio=1,sink_size=4,recent_size=40", Region::kPrompt, false}},
      {"criticalkv", {"criticalkv", Region::kPrompt, false}},
      // Re-rotated positions would count the generated entries as the prompt's here.
      {"finch", {"finch:rerotate=false", Region::kPrompt, false}},
      {"kvzip", {"kvzip:chunk_size=32", Region::kPrompt, true}},
      {"expected_attention", {"expected_attention", Region::kPrompt, false}},
      {"snapkv", {"snapkv", Region::kPrompt, false}},
      {"pyramidkv", {"pyramidkv", Region::kPrompt, false}},
      {"adakv", {"adakv", Region::kPrompt, false}},
      {"chunkkv", {"chunkkv", Region::kPrompt, false}},
      {"deferkv", {"deferkv", Region::kPrompt, false, false, false}},
      {"moment_kv",
       {"moment_kv:decode_budget=" + std::to_string(kDecodeBudget), Region::kGenerated, false, false, false}},
      {"laq", {"laq", Region::kPrompt, true}},
      {"laqpp", {"laqpp", Region::kPrompt, true}},
      {"speckv", {"speckv:n_draft=6", Region::kPrompt, true}},
      {"compresskv", {"compresskv:profile=" + stories_profile_path(), Region::kPrompt, false}},
      {"lookaheadkv", {"lookaheadkv:weights=" + stories_lookahead_weights_path(), Region::kPrompt, true}},
      {"qfilter", {"qfilter:filters=" + stories_qfilters_path(), Region::kPrompt, false}},
      {"behavior_preserving", {"behavior_preserving", Region::kPrompt, false, true}},
  };
  return cases;
}

bool evicts_prompt(Region r) { return r == Region::kPrompt || r == Region::kBoth; }
bool evicts_generated(Region r) { return r == Region::kGenerated || r == Region::kBoth; }

// Whether `b` adds a region to what `a` evicts.
bool adds_region(const MethodCase& a, const MethodCase& b) {
  return (evicts_prompt(b.region) && !evicts_prompt(a.region)) ||
         (evicts_generated(b.region) && !evicts_generated(a.region));
}

bool may_compose(const MethodCase& earlier, const MethodCase& later) {
  if (earlier.extra_forward && later.extra_forward) return false;
  const bool shared = (evicts_prompt(earlier.region) && evicts_prompt(later.region)) ||
                      (evicts_generated(earlier.region) && evicts_generated(later.region));
  // A press may follow one in its region if it reads the cache as the other left it, the
  // other is done by then, and it has a region of its own to work on.
  return !shared || (later.reads_cache_as_is && earlier.once_at_prefill_end && adds_region(earlier, later));
}

struct Held {
  int64_t prompt_entries = 0, generated_entries = 0, bytes = 0;
  std::vector<std::vector<int32_t>> positions;  // [layer * n_head_kv + g]: kept positions
};

class Stories {
 public:
  Stories() : model_(Model::load(testing::stories_model_path())), pool_(std::make_shared<ThreadPool>(2)) {
    std::string text;
    while (static_cast<int64_t>(prompt_.size()) < 100) {
      text += "Once upon a time, there was a little girl named Lily. She loved to play with her ball in the park. ";
      prompt_ = model_->tokenizer().encode(text, true, false);
    }
  }

  int64_t prompt_length() const { return static_cast<int64_t>(prompt_.size()); }
  const Model& model() const { return *model_; }

  // The prompt, then kDecode greedy steps, under the press; what the cache holds after.
  Held run(const std::string& spec) const {
    SessionOptions options;
    options.n_ctx = 256;
    options.n_batch = 32;
    Session session(model_, pool_, options);
    session.set_draft_model(model_);  // for speckv: the model drafts for itself
    session.set_press(make_press(spec, KvBudget::per_head(kBudget)));
    session.prefill(prompt_);
    for (int64_t i = 0; i < kDecode; ++i) {
      const float* logits = session.last_logits();
      const int64_t n_vocab = model_->config().n_vocab;
      session.decode(static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits));
    }
    const KvCache& kv = kv_cache_of(session);
    Held held;
    for (int64_t l = 0; l < kv.n_layer(); ++l) {
      for (int64_t g = 0; g < kv.n_head_kv(); ++g) {
        held.positions.emplace_back(kv.positions(l, g), kv.positions(l, g) + kv.length(l, g));
        for (int64_t j = 0; j < kv.length(l, g); ++j) {
          ++(kv.positions(l, g)[j] < prompt_length() ? held.prompt_entries : held.generated_entries);
        }
      }
    }
    held.bytes = kv.bytes_held();
    EXPECT_EQ(held.bytes, (held.prompt_entries + held.generated_entries) * kv.bytes_per_entry()) << spec;
    return held;
  }

 private:
  std::shared_ptr<const Model> model_;
  std::shared_ptr<ThreadPool> pool_;
  std::vector<int32_t> prompt_;
};

// Checks that each of the presses holds its region to its budget.
void expect_budgets_hold(const Held& held, const std::vector<const MethodCase*>& parts, const Stories& stories,
                         const std::string& spec) {
  const ModelConfig& c = stories.model().config();
  const int64_t heads = c.n_layer * c.n_head_kv;
  for (const MethodCase* part : parts) {
    if (part->region == Region::kBoth) {
      EXPECT_LE(held.prompt_entries + held.generated_entries, kBudget * heads) << spec;
    }
    if (part->region == Region::kPrompt) {
      // SpecKV feeds the prompt's last token again after its eviction: b + 1.
      const int64_t budget = kBudget + (part->spec.rfind("speckv", 0) == 0 ? 1 : 0);
      EXPECT_LE(held.prompt_entries, budget * heads) << spec << ": " << part->spec << "'s prompt budget";
    }
    if (part->region == Region::kGenerated) {
      EXPECT_LE(held.generated_entries, kDecodeBudget * heads) << spec << ": " << part->spec << "'s decode budget";
    }
  }
}

TEST(Composition, EveryOrderedPairRunsWithBothTakingEffectOrIsRefusedNamingBoth) {
  const auto cases = method_cases();
  ASSERT_EQ(cases.size(), press_catalogue().size()) << "a method without a row here";
  const Stories stories;
  const ModelConfig& c = stories.model().config();
  const int64_t heads = c.n_layer * c.n_head_kv;
  std::map<std::string, Held> alone;
  for (const PressInfo& info : press_catalogue()) {
    const MethodCase& m = cases.at(info.name);
    alone[info.name] = stories.run(m.spec);
    const Held& held = alone[info.name];
    expect_budgets_hold(held, {&m}, stories, m.spec);
    const int64_t prompt = stories.prompt_length() * heads, generated = kDecode * heads;
    if (m.region == Region::kBoth) {  // one budget over both regions
      EXPECT_LT(held.prompt_entries + held.generated_entries, prompt + generated) << m.spec;
    } else {
      EXPECT_EQ(held.prompt_entries < prompt, evicts_prompt(m.region)) << m.spec;
      EXPECT_EQ(held.generated_entries < generated, evicts_generated(m.region)) << m.spec;
    }
  }
  int64_t composed = 0, refused = 0;
  for (const PressInfo& first : press_catalogue()) {
    for (const PressInfo& second : press_catalogue()) {
      const MethodCase& a = cases.at(first.name);
      const MethodCase& b = cases.at(second.name);
      const std::string spec = a.spec + "+" + b.spec;
      if (!may_compose(a, b)) {
        ++refused;
        try {
          make_press(spec, KvBudget::per_head(kBudget));
          ADD_FAILURE() << spec << " was not refused";
        } catch (const Error& e) {
          const std::string message = e.what();
          for (const MethodCase* part : {&a, &b}) {
            const std::string name = make_press(part->spec, KvBudget::per_head(kBudget))->describe();
            EXPECT_NE(message.find("'" + name + "'"), std::string::npos) << spec << ": " << message;
          }
        }
        continue;
      }
      ++composed;
      const Held held = stories.run(spec);
      expect_budgets_hold(held, {&a, &b}, stories, spec);
      // Both take effect: against each press alone, the other one's eviction shows.
      for (const MethodCase* part : {&a, &b}) {
        const MethodCase* other = part == &a ? &b : &a;
        const Held& part_alone = alone.at(part == &a ? first.name : second.name);
        if (other->region == Region::kNone) {
          EXPECT_EQ(held.bytes, part_alone.bytes) << spec;
        } else if (adds_region(*part, *other)) {
          EXPECT_LT(held.bytes, part_alone.bytes) << spec << ": " << other->spec << " took no effect";
        } else {
          EXPECT_NE(held.positions, part_alone.positions) << spec << ": " << other->spec << " took no effect";
        }
      }
    }
  }
  // Every prompt press with moment_kv both ways, each but deferkv before tova, full with all.
  EXPECT_EQ(composed, 28 * 2 + 27 + 61);
  EXPECT_EQ(refused, 31 * 31 - composed);
}

}  // namespace
}  // namespace deferkv
