// The server's small parts: byte sizes, stop strings, logprobs beside the text.
#include <gtest/gtest.h>

#include "deferkv/error.h"
#include "deferkv/model.h"
#include "deferkv/tokenizer.h"
#include "server/byte_size.h"
#include "server/completion_stream.h"
#include "server/test_server.h"

namespace deferkv::server {
namespace {

TEST(ByteSize, ReadsPlainAndSuffixedSizes) {
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("512MiB"), 512 * 1048576LL);
  EXPECT_EQ(parse_byte_size("2GiB"), 2147483648LL);
  EXPECT_EQ(parse_byte_size("3KB"), 3000);
  for (const char* bad : {"", "0", "-5", "GiB", "2XB", "1.5GiB", "99999999999TiB"}) {
    EXPECT_THROW(parse_byte_size(bad), Error) << bad;
  }
}

// Feeds the tokens of `text` and collects what the stream lets out, reading after each
// token as a streaming client does: text read early must never be cut off later.
std::string stream_text(const Tokenizer& tok, const std::string& text, std::vector<std::string> stop, bool& stopped) {
  CompletionStream stream(tok, DecodeStart::kContinuation, std::move(stop));
  std::string out;
  for (int32_t id : tok.encode(text, false, false)) {
    const bool go_on = stream.push(id);
    out += stream.poll().text;
    if (!go_on) break;
  }
  stream.finish({});
  for (;;) {
    auto u = stream.wait_for_update();
    out += u.text;
    if (u.ended) break;
  }
  stopped = stream.stopped_by_string();
  return out;
}

TEST(CompletionStream, CutsTheTextAtTheFirstStopString) {
  auto model = Model::load(testing::stories_model_path());
  bool stopped = false;
  EXPECT_EQ(stream_text(model->tokenizer(), "Once upon a time there was a dog", {"there", "a t"}, stopped), " Once upon ");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(stream_text(model->tokenizer(), "Once upon a time", {"dragon"}, stopped), " Once upon a time");
  EXPECT_FALSE(stopped);
}

// Each token's logprobs go out with the piece where its text begins, read token by token
// as a streaming client reads; those cut off with a stop string are not reported.
TEST(CompletionStream, LogprobsGoWithTheTextTheirTokensBegin) {
  auto model = Model::load(testing::stories_model_path());
  const Tokenizer& tok = model->tokenizer();
  const std::vector<int32_t> ids = tok.encode("Once upon a time there was a dog", false, false);
  CompletionStream stream(tok, DecodeStart::kContinuation, {"there"});
  std::string text;
  std::vector<int32_t> reported;
  std::vector<size_t> offsets;
  auto take = [&](const CompletionStream::Update& u) {
    text += u.text;
    for (const TokenLogprobs& lp : u.logprobs) reported.push_back(lp.token);
    offsets.insert(offsets.end(), u.text_offsets.begin(), u.text_offsets.end());
    for (size_t offset : u.text_offsets) EXPECT_LT(offset, text.size()) << "a token reported before its text";
  };
  for (int32_t id : ids) {
    stream.push_logprobs({id, -1.0f, {}});
    const bool go_on = stream.push(id);
    take(stream.poll());
    if (!go_on) break;
  }
  stream.finish({});
  for (;;) {
    const CompletionStream::Update u = stream.wait_for_update();
    take(u);
    if (u.ended) break;
  }
  EXPECT_EQ(text, " Once upon a time ");
  // The tokens of " Once upon a time" and the one whose text begins with the space before
  // "there" (it straddles the cut); "there"'s own tokens and the rest are not reported.
  std::string pieces;
  for (int32_t id : reported) pieces += tok.token_piece(id);
  EXPECT_EQ(pieces, " Once upon a time there");  // not " was a dog"
  ASSERT_EQ(offsets.size(), reported.size());
  for (size_t i = 1; i < offsets.size(); ++i) EXPECT_EQ(offsets[i], offsets[i - 1] + tok.token_piece(reported[i - 1]).size());
}

}  // namespace
}  // namespace deferkv::server
