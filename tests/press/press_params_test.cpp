// Press specs: parsing, defaults, and clear errors for bad input.
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/press.h"
#include "kv/kv_cache.h"
#include "press/press_test_util.h"
#include "press/registry.h"
#include "support/scratch_dir.h"

namespace deferkv {
namespace {

TEST(PressSpec, DescribeFillsEveryDefault) {
  // The method's own parameters, then the shared parts' (allocation, selection, trigger).
  EXPECT_EQ(make_press("snapkv", KvBudget::per_head(64))->describe(),
            "snapkv:window=32,kernel=7,pooling=max,gqa=mean,alloc=uniform,rounding=exact,beta=20,alpha=0.2,profile=,ratios=,"
            "chunk=0,reuse=1,d=0,pool=all,per_step=false,every=0,ratio_of=prompt");
  EXPECT_EQ(make_press("deferkv:d=2,base=adakv", KvBudget::per_head(64))->describe(),
            "deferkv:d=2,eta=0.7,temporal_mode=block,no_decode_feedback=false,no_temporal_weighting=false,"
            "pool_order=fuse_then_pool,pool=2x,pool_ahead=8,window=32,kernel=7,pooling=max,gqa=mean,base=adakv,"
            "rounding=exact,beta=20,alpha=0.2,profile=,ratios=,chunk=0,reuse=1");
}

// Methods give their defaults typed (SharedDefaults, window_scoring_parameters); the
// catalogue shows them as the values a user writes.
TEST(PressSpec, TypedDefaultsShowAsTheValuesAUserWrites) {
  const KvBudget b = KvBudget::per_head(64);
  EXPECT_NE(make_press("tova", b)->describe().find(",per_step=true,"), std::string::npos);
  EXPECT_NE(make_press("behavior_preserving", b)->describe().find(",per_step=false,"), std::string::npos);
  EXPECT_NE(make_press("pyramidkv", b)->describe().find(",alloc=pyramid,"), std::string::npos);
  EXPECT_NE(make_press("adakv", b)->describe().find(",alloc=adakv,"), std::string::npos);
  EXPECT_NE(make_press("chunkkv", b)->describe().find(",chunk=10,"), std::string::npos);
  EXPECT_NE(make_press("laq", b)->describe().find(",pooling=max,"), std::string::npos);
}

TEST(PressSpec, BadInputIsAClearError) {
  EXPECT_NE(testing::press_error("snapkb").find("unknown press 'snapkb'"), std::string::npos);
  for (const char* spec : {"snapkv+", "+snapkv", "snapkv++knorm", ""}) {
    EXPECT_NE(testing::press_error(spec).find("has an empty part"), std::string::npos) << spec;
  }
  EXPECT_NE(testing::press_error("snapkv:windw=8").find("no parameter 'windw'"), std::string::npos);
  EXPECT_NE(testing::press_error("snapkv:window").find("not key=value"), std::string::npos);
  EXPECT_NE(testing::press_error("snapkv:window=abc").find("window=abc is not an integer"), std::string::npos);
  EXPECT_NE(testing::press_error("snapkv:kernel=4").find("must be odd"), std::string::npos);
  EXPECT_NE(testing::press_error("deferkv:eta=1.5").find("out of range"), std::string::npos);
  EXPECT_NE(testing::press_error("deferkv:base=h2o").find("not one of: snapkv, pyramidkv, adakv"), std::string::npos);
  EXPECT_NE(testing::press_error("tova:per_step=maybe").find("not a boolean"), std::string::npos);
  EXPECT_NE(testing::press_error("snapkv", KvBudget::per_head(16)).find("smaller than the 32 protected window"),
            std::string::npos);
  EXPECT_THROW(KvBudget::per_head(0), Error);
  EXPECT_THROW(KvBudget::ratio(1.0), Error);
  EXPECT_THROW(KvBudget::ratio(-0.1), Error);
}

// The scorers and the presses that evict in their own way (PromptPress) refuse a budget
// below the entries they always keep with one message: how many, which, and the fix.
TEST(PressSpec, EveryPressRefusesABudgetBelowWhatItAlwaysKeeps) {
  const std::string profile = testing::scratch_file("press-params-compresskv.json");
  std::ofstream(profile) << R"({"format": "deferkv-compresskv-profile/1",
    "model": {"name": "tiny", "n_layer": 2, "n_head": 2},
    "retrieval_heads": [[0], [1]], "layer_scores": [0.5, 0.5]})";
  const std::string window = "window entries of '";
  const std::string shrink_window = ": raise the budget to at least 32, or shrink the window (window=N";
  const struct {
    std::string spec, what, fix;
  } cases[] = {
      {"snapkv", "the 32 protected " + window + "snapkv:", shrink_window},
      {"speckv", "the 32 protected " + window + "speckv:", shrink_window},
      {"compresskv:window=32,profile=" + profile, "the 32 protected " + window + "compresskv:", shrink_window},
      {"laqpp:window=8,local_window=32", "the 32 protected window entries (window=8, local_window=32) of 'laqpp:",
       ": raise the budget to at least 32, or shrink the windows (window=N, local_window=N"},
      {"behavior_preserving:window=28", "the 32 protected entries (window=28 + sinks=4) of 'behavior_preserving:",
       ": raise the budget to at least 32, or shrink the window or the sinks (window=N, sinks=N"},
  };
  for (const auto& c : cases) {
    const std::string error = testing::press_error(c.spec, KvBudget::per_head(16));
    EXPECT_NE(error.find("the KV budget of 16 entries per head is smaller than " + c.what), std::string::npos)
        << c.spec << ": " << error;
    EXPECT_NE(error.find(c.fix), std::string::npos) << c.spec << ": " << error;
    EXPECT_NO_THROW(make_press(c.spec, KvBudget::per_head(32))) << c.spec;  // the budget may equal them
    EXPECT_NO_THROW(make_press(c.spec, KvBudget::ratio(0.9))) << c.spec;    // a ratio resolves per prompt
  }
}

// The presses that score with forward passes of their own are refused together, each
// named with the protocol it runs.
TEST(PressSpec, TwoExtraForwardProtocolsAreNamedInTheRefusal) {
  const std::string error = testing::press_error("laq+speckv");
  EXPECT_NE(error.find("(lookahead) and 'speckv:"), std::string::npos) << error;
  EXPECT_NE(error.find("(draft) cannot be composed: both run extra forward passes"), std::string::npos) << error;
}

// A press that needs the session's capabilities (a lookahead, a draft) and is driven by
// hand, never set on a session, fails naming itself and what it needed, at the point it
// would have used them.
TEST(PressSpec, APressDrivenWithoutASessionSaysWhatItNeeded) {
  for (const auto& [spec, needs] : {std::pair{"laq", "runs a lookahead"}, std::pair{"speckv", "drafts"}}) {
    auto press = make_press(spec, KvBudget::per_head(40));
    KvCache cache(1, 1, 8, 256);
    testing::press_prompt_begins(*press, cache, 0, 200);
    try {
      testing::press_prompt_ends(*press, cache);
      ADD_FAILURE() << spec << " ran without a session";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(needs) + ": use it on a session"), std::string::npos)
          << e.what();
      EXPECT_EQ(std::string(e.what()).find(std::string("press '") + spec + ":"), 0u) << e.what();
    }
  }
}

TEST(PressSpec, BudgetsResolveAsThePapersAndKvpressDo) {
  EXPECT_EQ(KvBudget::per_head(128).resolve(5000), 128);
  EXPECT_EQ(KvBudget::ratio(0.25).resolve(1001), 750);  // int(1001 * 0.75)
}

TEST(PressSpec, CatalogueListsEveryMethodWithBuildableDefaults) {
  std::vector<std::string> names;
  for (const PressInfo& info : press_catalogue()) {
    names.push_back(info.name);
    EXPECT_FALSE(info.summary.empty());
    EXPECT_FALSE(info.paper.empty());
    EXPECT_NE(info.reads, PressReads::kUnstated) << info.name << ": say what it reads in registry.cpp's methods()";
    if (info.name == "lookaheadkv") continue;  // needs a weights file: tests/press/lookaheadkv_test.cpp
    if (info.name == "compresskv") continue;  // needs a profile file: tests/press/compresskv_test.cpp
    if (info.name == "duo_attention") {  // the share of streaming heads: a kv_ratio (kept_set_layers_test.cpp)
      EXPECT_NO_THROW(make_press(info.name, KvBudget::ratio(0.5)));
      continue;
    }
    if (info.name == "qfilter") continue;  // needs a filters file: tests/press/kept_set_qfilter_test.cpp
    EXPECT_NO_THROW(make_press(info.name, KvBudget::per_head(64))) << info.name;
  }
  for (const char* expected : {"full", "streaming_llm", "h2o", "tova", "knorm", "keydiff", "random", "snapkv", "pyramidkv", "adakv",
                               "chunkkv", "deferkv", "expected_attention", "moment_kv", "laq", "laqpp", "speckv", "compresskv",
                               "behavior_preserving", "lagkv", "leverage", "cur", "non_causal_attention",
                               "compactor", "criticalkv", "finch", "kvzip", "simlayerkv", "duo_attention", "qfilter"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
}

// A method added while the program runs (a Python scorer, python/src/python_scorer.cpp): found
// by name in specs and compositions, replaced by a later one of its name, refused under a
// built-in name or one with a spec's separators, gone once cleared.
TEST(PressSpec, AddedMethodsAreFoundReplacedAndRefusedByName) {
  auto method = [](const std::string& name, int64_t version) {
    return PressMethod{{name, "an added method", "", {{"k", "0", "a parameter of its own"}}},
                       [version](const PressParams& p, const KvBudget& b) {
                         return make_press(fmt::format("knorm:skip_layers={}", version + p.get_int("k", 0, 9)), b);
                       }};
  };
  const KvBudget b = KvBudget::per_head(64);
  add_press_method(method("added_test", 1));
  EXPECT_NE(make_press("added_test:k=2", b)->describe().find("skip_layers=3"), std::string::npos);
  add_press_method(method("added_test", 5));  // replaces the first
  EXPECT_NE(make_press("added_test", b)->describe().find("skip_layers=5"), std::string::npos);
  EXPECT_NO_THROW(make_press("added_test+moment_kv", b));
  EXPECT_NE(testing::press_error("added_test:bogus=1").find("press 'added_test' has no parameter 'bogus'"),
            std::string::npos);
  EXPECT_NE(testing::press_error("nothing_such").find(", added_test)"), std::string::npos);
  for (const char* bad : {"a:b", "a+b", "a b", "a@b", ""}) {
    EXPECT_THROW(add_press_method(method(bad, 1)), Error) << bad;
  }
  try {
    add_press_method(method("snapkv", 1));
    ADD_FAILURE() << "a built-in name was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'snapkv' is a built-in press"), std::string::npos) << e.what();
  }
  clear_added_press_methods();
  EXPECT_NE(testing::press_error("added_test").find("unknown press 'added_test'"), std::string::npos);
}

}  // namespace
}  // namespace deferkv
