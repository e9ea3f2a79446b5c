// The batch engine's kept contexts (engine/context_store.h): their bytes reserved against the
// KV capacity, idle ones dropped least recently used for room, never one in use, and one
// removed while in use freed when its last user ends. Expected bytes are the contexts' own
// (CompressedContext::bytes), summed by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/thread_pool.h"
#include "deferkv/compressed_context.h"
#include "deferkv/press.h"
#include "deferkv/tokenizer.h"
#include "engine/context_store.h"
#include "model/test_models.h"
#include "tensor/gguf_test_util.h"

namespace deferkv {
namespace {

std::shared_ptr<const Model> stories() {
  static const std::shared_ptr<const Model> model = Model::load(testing::stories_model_path());
  return model;
}

std::shared_ptr<const CompressedContext> make(int64_t budget) {
  const std::shared_ptr<const Model> model = stories();
  Session s(model, std::make_shared<ThreadPool>(1));
  s.set_press(make_press("knorm", KvBudget::per_head(budget)));
  return CompressedContext::compress(
      s, model->tokenizer().encode("Once upon a time, there was a little girl named Lily. She loved to play.", true, false));
}

TEST(ContextStore, DropsIdleContextsLeastRecentlyUsedNeverOneInUse) {
  const auto a = make(4), b = make(6), c = make(8);
  ASSERT_LT(a->bytes(), b->bytes());
  const int64_t capacity = a->bytes() + b->bytes() + c->bytes();
  KvAdmission admission(capacity);
  ContextStore store(admission);
  store.insert("a", a);
  store.insert("b", b);
  store.insert("c", c);
  EXPECT_EQ(admission.reserved(), capacity);
  EXPECT_EQ(store.bytes(), capacity);
  EXPECT_EQ(store.find("a"), a);  // a is now the most recently used: b, then c, go first
  EXPECT_EQ(store.find("zz"), nullptr);
  EXPECT_EQ(store.hits(), 1);
  EXPECT_EQ(store.misses(), 1);

  ASSERT_TRUE(store.make_room(1));  // b is the least recently used
  EXPECT_FALSE(store.describe("b").has_value());
  EXPECT_TRUE(store.describe("a").has_value());
  EXPECT_EQ(admission.reserved(), a->bytes() + c->bytes());
  EXPECT_EQ(store.dropped(), 1);

  // a in use: room for more than c's bytes beside a cannot be made, and a stays.
  ASSERT_TRUE(store.pin("a", a.get()));
  EXPECT_FALSE(store.make_room(capacity - a->bytes() + 1));
  EXPECT_TRUE(store.describe("a").has_value());
  EXPECT_FALSE(store.describe("c").has_value());  // dropped trying
  EXPECT_EQ(admission.reserved(), a->bytes());
  EXPECT_EQ(store.describe("a")->running, 1);

  // Removed while in use: gone from the names, its bytes held until it is unpinned.
  EXPECT_TRUE(store.remove("a"));
  EXPECT_FALSE(store.remove("a"));
  EXPECT_TRUE(store.list().empty());
  EXPECT_EQ(admission.reserved(), a->bytes());
  EXPECT_EQ(store.resident(), 1);
  store.unpin("a", a.get());
  EXPECT_EQ(admission.reserved(), 0);
  EXPECT_EQ(store.bytes(), 0);
  EXPECT_EQ(store.resident(), 0);
}

TEST(ContextStore, PinRefusesANameThatHoldsAnotherContext) {
  const auto a = make(4), b = make(4);
  KvAdmission admission(a->bytes() * 4);
  ContextStore store(admission);
  store.insert("x", a);
  EXPECT_FALSE(store.pin("x", b.get()));  // "x" is not b: b was dropped and "x" reused, say
  EXPECT_FALSE(store.pin("y", a.get()));
  EXPECT_TRUE(store.remove("x"));  // not in use: freed at once
  EXPECT_EQ(admission.reserved(), 0);
}

// A spilled context is read without the engine's lock (lookup, load, adopt): two requests
// that load it at once get one context, kept once; one deleted while it was read serves
// its request and is not kept again; a store opened on the directory removes the temporary
// file of a save a crash cut short. Mutant: adopt() without its already-resident case keeps
// the second load over the first (fails).
TEST(ContextStore, LoadingOutsideTheLockKeepsOneContextPerId) {
  const gguf_test::TempDir dir;
  const auto a = make(4);
  KvAdmission admission(a->bytes() * 3);
  ContextStore store(admission, dir.path().string(), stories());
  store.write("a", *a);
  store.insert("a", a, "4 per head");
  ASSERT_TRUE(store.make_room(a->bytes() * 3));  // a is spilled: its memory is free, its file kept
  EXPECT_EQ(store.resident(), 0);
  ContextStore::Found found = store.lookup("a");
  ASSERT_EQ(found.context, nullptr);
  ASSERT_FALSE(found.spilled_file.empty());
  const auto first = store.load(found.spilled_file), second = store.load(found.spilled_file);
  EXPECT_EQ(first->tokens(), a->tokens());
  EXPECT_EQ(store.adopt("a", first), first);
  EXPECT_EQ(store.adopt("a", second), first);  // loaded meanwhile by another request: the kept one
  EXPECT_EQ(store.resident(), 1);
  EXPECT_EQ(store.bytes(), a->bytes());
  EXPECT_EQ(store.loads(), 2);

  ASSERT_TRUE(store.make_room(a->bytes() * 3));
  found = store.lookup("a");
  const auto third = store.load(found.spilled_file);
  EXPECT_TRUE(store.remove("a"));  // deleted while it was read
  EXPECT_EQ(store.adopt("a", third), third);
  EXPECT_EQ(store.resident(), 0);
  EXPECT_FALSE(store.describe("a").has_value());

  const std::string cut_short = (dir.path() / "b.dkvctx.tmp.12345").string();
  std::ofstream(cut_short) << "half a file";
  ContextStore reopened(admission, dir.path().string(), stories());
  EXPECT_FALSE(std::filesystem::exists(cut_short));
}

}  // namespace
}  // namespace deferkv
