// The one-shot machinery's own checks on what a method chooses.
#include <gtest/gtest.h>

#include "base/thread_pool.h"
#include "deferkv/error.h"
#include "press/one_shot_press.h"
#include "press/press_test_util.h"

namespace deferkv {
namespace {

const PressInfo kInfo{"fixed", "keeps the given candidates", "-", {}};

// Keeps the same candidate indices in every head.
class FixedChoice final : public OneShotPress {
 public:
  explicit FixedChoice(std::vector<int32_t> keep)
      : OneShotPress(PressParams(kInfo, ""), KvBudget::per_head(16), 0, 0, {}), keep_(std::move(keep)) {}

 protected:
  std::vector<std::vector<int32_t>> choose(const LayerEviction& layer) override {
    return std::vector<std::vector<int32_t>>(static_cast<size_t>(layer.n_head_kv()), keep_);
  }

 private:
  std::vector<int32_t> keep_;
};

std::string error_choosing(std::vector<int32_t> keep) {
  Session session(Model::load(testing::press_test_model_path()), std::make_shared<ThreadPool>(1));
  session.set_press(std::make_unique<FixedChoice>(std::move(keep)));
  try {
    session.prefill(testing::random_prompt(40));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OneShotPress, AChoiceOutsideTheCandidatesNamesTheBadIndex) {
  EXPECT_NE(error_choosing({3, 40}).find("chose entry 40 of layer 0 head 0 outside its 40 candidates"),
            std::string::npos) << error_choosing({3, 40});
  // Below the range as well as above it: the index named is the one outside.
  const std::string below = error_choosing({-2, 3});
  EXPECT_NE(below.find("chose entry -2 of layer 0 head 0"), std::string::npos) << below;
  EXPECT_EQ(error_choosing({0, 5, 39}), "");
}

}  // namespace
}  // namespace deferkv
