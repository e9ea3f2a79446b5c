// The server's small parts: byte sizes, stop strings.
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

}  // namespace
}  // namespace deferkv::server
