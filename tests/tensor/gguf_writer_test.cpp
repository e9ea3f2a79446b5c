// GgufWriter → GgufFile round trips: every metadata value type, every DType, alignments.
#include "tensor/gguf_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "gguf_test_util.h"
#include "tensor/gguf_file.h"

namespace deferkv {
namespace {

using gguf_test::read_bytes;
using gguf_test::TempDir;

GgufValue u(GgufType type, uint64_t v) { return {type, v}; }
GgufValue i(GgufType type, int64_t v) { return {type, v}; }
GgufValue f(GgufType type, double v) { return {type, v}; }

// Values equal in type and content; NaN equals NaN.
void expect_same(const GgufValue& want, const GgufValue& got, const std::string& key) {
  ASSERT_EQ(want.type, got.type) << key;
  if (want.type == GgufType::ARRAY) {
    const GgufArray& a = want.as_array(key);
    const GgufArray& b = got.as_array(key);
    ASSERT_EQ(a.elem_type, b.elem_type) << key;
    ASSERT_EQ(a.items.size(), b.items.size()) << key;
    for (size_t k = 0; k < a.items.size(); ++k) expect_same(a.items[k], b.items[k], key);
  } else if (gguf_type_is_float(want.type) && std::isnan(std::get<double>(want.data))) {
    EXPECT_TRUE(std::isnan(std::get<double>(got.data))) << key;
  } else {
    EXPECT_EQ(want.data, got.data) << key;
  }
}

std::vector<std::pair<std::string, GgufValue>> every_value_type() {
  using T = GgufType;
  using Array = std::vector<GgufValue>;
  auto strings =
      GgufValue::of_array(T::STRING, {GgufValue::of_string(""), GgufValue::of_string("▁the"),
                                      GgufValue::of_string(std::string("nul\0inside", 10))});
  auto ints = GgufValue::of_array(T::INT32, {GgufValue::of_i32(-1), GgufValue::of_i32(7)});
  auto nested = GgufValue::of_array(
      T::ARRAY, {ints, GgufValue::of_array(T::INT32, {}),
                 GgufValue::of_array(T::INT32, {GgufValue::of_i32(INT32_MIN)})});
  auto nested_strings = GgufValue::of_array(T::ARRAY, {strings, strings});
  auto deepest = GgufValue::of_array(
      T::ARRAY, {GgufValue::of_array(T::ARRAY, {GgufValue::of_array(T::ARRAY, {ints})})});
  return {
      {"u8.max", u(T::UINT8, 255)},
      {"i8.min", i(T::INT8, -128)},
      {"u16.max", u(T::UINT16, 65535)},
      {"i16.min", i(T::INT16, -32768)},
      {"u32.max", u(T::UINT32, UINT32_MAX)},
      {"i32.min", i(T::INT32, INT32_MIN)},
      {"u64.max", u(T::UINT64, UINT64_MAX)},
      {"i64.min", i(T::INT64, INT64_MIN)},
      {"i64.max", i(T::INT64, INT64_MAX)},
      {"f32.tenth", f(T::FLOAT32, double{0.1f})},
      {"f32.denormal", f(T::FLOAT32, double{std::numeric_limits<float>::denorm_min()})},
      {"f32.inf", f(T::FLOAT32, -std::numeric_limits<double>::infinity())},
      {"f32.nan", f(T::FLOAT32, std::numeric_limits<double>::quiet_NaN())},
      {"f64.tenth", f(T::FLOAT64, 0.1)},
      {"f64.max", f(T::FLOAT64, std::numeric_limits<double>::max())},
      {"bool.true", GgufValue::of_bool(true)},
      {"bool.false", GgufValue::of_bool(false)},
      {"string.empty", GgufValue::of_string("")},
      {"string.utf8", GgufValue::of_string("héllo {{ chat }}\n\t\"quoted\"")},
      {"array.empty", GgufValue::of_array(T::FLOAT32, {})},
      {"array.u8", GgufValue::of_array(T::UINT8, {u(T::UINT8, 0), u(T::UINT8, 255)})},
      {"array.bool",
       GgufValue::of_array(T::BOOL, {GgufValue::of_bool(true), GgufValue::of_bool(false)})},
      {"array.f64", GgufValue::of_array(T::FLOAT64, {f(T::FLOAT64, -2.5), f(T::FLOAT64, 1e300)})},
      {"array.u64", GgufValue::of_array(T::UINT64, Array{u(T::UINT64, UINT64_MAX)})},
      {"array.i64", GgufValue::of_array(T::INT64, Array{i(T::INT64, INT64_MIN)})},
      {"array.strings", strings},
      {"array.nested", nested},
      {"array.nested_strings", nested_strings},
      {"array.deepest", deepest},
  };
}

TEST(GgufWriter, EveryMetadataValueTypeRoundTrips) {
  TempDir dir;
  auto values = every_value_type();
  GgufWriter writer;
  for (const auto& [key, value] : values) writer.add_metadata(key, value);
  writer.write(dir.file("meta.gguf"));

  GgufFile file(dir.file("meta.gguf"));
  EXPECT_EQ(file.version(), 3u);
  ASSERT_EQ(file.metadata().size(), values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    EXPECT_EQ(file.metadata()[k].first, values[k].first);  // file order is insertion order
    expect_same(values[k].second, file.metadata()[k].second, values[k].first);
  }
  EXPECT_TRUE(file.tensors().empty());
}

TEST(GgufWriter, VocabOnlyFileEndsAfterTheMetadata) {
  TempDir dir;
  GgufWriter writer;
  writer.add_metadata("general.architecture", GgufValue::of_string("llama"));
  writer.write(dir.file("vocab.gguf"));
  EXPECT_EQ(std::filesystem::file_size(dir.file("vocab.gguf")), 24u + 8 + 20 + 4 + 8 + 5);
  EXPECT_EQ(GgufFile(dir.file("vocab.gguf")).get_string("general.architecture"), "llama");
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

struct Expected {
  std::string name;
  uint32_t type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};

class GgufWriterAlignment : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufWriterAlignment, TensorsOfEveryTypeRoundTripAligned) {
  const uint32_t alignment = GetParam();
  TempDir dir;
  GgufWriter writer;
  writer.add_metadata("general.name", GgufValue::of_string("round trip"));
  if (alignment != GgufFile::kDefaultAlignment) {
    writer.add_metadata("general.alignment", GgufValue::of_u32(alignment));
  }
  std::vector<Expected> want;
  uint32_t seed = 1;
  for (const char* name : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"}) {
    DType type = *dtype_from_name(name);
    // Odd row counts make most sizes not a multiple of the alignment, so padding is tested.
    std::vector<int64_t> ne = {dtype_block_elems(type) * 2, 3};
    auto bytes = random_bytes(static_cast<size_t>(dtype_row_bytes(type, ne[0]) * ne[1]), seed++);
    want.push_back({std::string("t.") + name, static_cast<uint32_t>(type), ne, bytes});
  }
  // A type deferkv has no kernels for (Q2_K), 3-D and 4-D shapes, a 1-element tensor.
  want.push_back({"t.q2_k", 10, {256, 2, 3}, random_bytes(84 * 6, seed++)});
  want.push_back({"t.4d", 0, {2, 3, 1, 2}, random_bytes(4 * 12, seed++)});
  want.push_back({"t.scalar", 0, {1}, random_bytes(4, seed++)});
  for (const auto& t : want)
    writer.add_tensor(t.name, t.type, t.ne, t.bytes.data(), t.bytes.size());
  // A streamed tensor, one row per call.
  Expected rows{"t.rows", 1, {8, 5}, random_bytes(16 * 5, seed++)};
  writer.add_tensor(rows.name, rows.type, rows.ne, [&](const GgufByteSink& sink) {
    for (size_t r = 0; r < 5; ++r) sink(rows.bytes.data() + r * 16, 16);
  });
  want.push_back(rows);
  writer.write(dir.file("tensors.gguf"));

  GgufFile file(dir.file("tensors.gguf"));
  EXPECT_EQ(file.alignment(), alignment);
  EXPECT_EQ(file.data_offset() % alignment, 0u);
  ASSERT_EQ(file.tensors().size(), want.size());
  uint64_t end = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const GgufTensorInfo& got = file.tensors()[k];
    SCOPED_TRACE(want[k].name);
    EXPECT_EQ(got.name, want[k].name);
    EXPECT_EQ(got.ggml_type, want[k].type);
    ASSERT_EQ(got.n_dims, want[k].ne.size());
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(got.ne[d], d < want[k].ne.size() ? want[k].ne[d] : 1);
    EXPECT_EQ(got.offset % alignment, 0u);
    ASSERT_EQ(got.nbytes, want[k].bytes.size());
    EXPECT_EQ(std::vector<uint8_t>(got.data, got.data + got.nbytes), want[k].bytes);
    EXPECT_EQ(file.find_tensor(want[k].name), &got);
    end = got.offset + got.nbytes;
  }
  // Each tensor, the last included, is padded to the alignment.
  EXPECT_EQ(file.file_size(), file.data_offset() + (end + alignment - 1) / alignment * alignment);
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufWriterAlignment, ::testing::Values(32u, 64u, 256u, 8u));

TEST(GgufWriter, AFailedWriteLeavesTheTargetAlone) {
  TempDir dir;
  const std::string path = dir.file("model.gguf");
  std::vector<uint8_t> good(64, 7);
  GgufWriter first;
  first.add_tensor("t", DType::F32, {16}, good.data(), good.size());
  first.write(path);
  const auto before = read_bytes(path);

  GgufWriter failing;
  failing.add_tensor("t", 0, {16}, [](const GgufByteSink& sink) {
    float row[8] = {};
    sink(row, sizeof(row));
    throw Error("quantiser failed");
  });
  EXPECT_THROW(failing.write(path), Error);
  EXPECT_EQ(read_bytes(path), before);

  GgufWriter fresh;
  fresh.add_tensor("t", 0, {16}, [](const GgufByteSink&) { throw Error("no data"); });
  EXPECT_THROW(fresh.write(dir.file("new.gguf")), Error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("new.gguf")));
  // No temporary file is left behind either.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

std::string write_error(const GgufWriter& writer, const std::string& path) {
  try {
    writer.write(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error writing " << path;
  return "";
}

TEST(GgufWriter, ASourceMustGiveExactlyTheTensorsBytes) {
  TempDir dir;
  const std::string path = dir.file("x.gguf");
  GgufWriter short_source;
  short_source.add_tensor("w", 0, {4}, [](const GgufByteSink& sink) { sink("abcd", 4); });
  std::string message = write_error(short_source, path);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("'w' was given 4 of its 16 bytes"), std::string::npos) << message;

  GgufWriter long_source;
  long_source.add_tensor("w", 0, {1}, [](const GgufByteSink& sink) { sink("abcdefgh", 8); });
  EXPECT_NE(write_error(long_source, path).find("more than its 4 bytes"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(GgufWriter, ErrorsNameThePath) {
  GgufWriter writer;
  const std::string path = "/nonexistent-deferkv-dir/model.gguf";
  EXPECT_NE(write_error(writer, path).find(path), std::string::npos);
}

// The message of the Error that `add` throws on a fresh writer.
std::string add_error(const std::function<void(GgufWriter&)>& add) {
  GgufWriter writer;
  try {
    add(writer);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The statements, run on a fresh writer `w`, throw an Error whose message holds `part`.
#define EXPECT_REFUSED(part, ...) \
  EXPECT_PRED2(contains, add_error([&](GgufWriter& w) { __VA_ARGS__; }), part)

TEST(GgufWriter, RefusesMetadataAReaderWouldRefuse) {
  using T = GgufType;
  auto flag = GgufValue::of_bool(true);
  EXPECT_REFUSED("'k' is added twice", w.add_metadata("k", flag); w.add_metadata("k", flag));
  EXPECT_REFUSED("not valid UTF-8", w.add_metadata("bad\xff", flag));
  for (uint32_t a : {0u, 3u, 48u, 1u << 21}) {
    EXPECT_REFUSED("not a power of two", w.add_metadata("general.alignment", GgufValue::of_u32(a)));
  }
  EXPECT_REFUSED("must be UINT32", w.add_metadata("general.alignment", GgufValue::of_u64(64)));
  EXPECT_REFUSED("300 does not fit in UINT8", w.add_metadata("k", {T::UINT8, uint64_t{300}}));
  EXPECT_REFUSED("does not fit in INT16", w.add_metadata("k", {T::INT16, int64_t{-40000}}));
  EXPECT_REFUSED("holds another kind of value", w.add_metadata("k", {T::UINT32, int64_t{1}}));
  EXPECT_REFUSED("an array of STRING holds a INT32",
                 w.add_metadata("k", GgufValue::of_array(T::STRING, {GgufValue::of_i32(1)})));
  auto deep = GgufValue::of_array(T::INT32, {});
  for (int d = 0; d < 5; ++d) deep = GgufValue::of_array(T::ARRAY, {deep});
  EXPECT_REFUSED("nests arrays deeper", w.add_metadata("k", deep));
}

TEST(GgufWriter, RefusesTensorsAReaderWouldRefuse) {
  float data[4] = {};
  EXPECT_REFUSED("'t' is added twice", w.add_tensor("t", DType::F32, {4}, data, 16);
                 w.add_tensor("t", DType::F32, {4}, data, 16));
  EXPECT_REFUSED("takes 16 bytes, but 12 were given", w.add_tensor("t", DType::F32, {4}, data, 12));
  EXPECT_REFUSED("not a multiple of its block size 32",
                 w.add_tensor("t", DType::Q8_0, {33}, data, 34));
  EXPECT_REFUSED("unknown type id 77", w.add_tensor("t", 77, {4}, data, 16));
  EXPECT_REFUSED("0 dimensions", w.add_tensor("t", DType::F32, {}, data, 0));
  EXPECT_REFUSED("5 dimensions", w.add_tensor("t", DType::F32, {1, 1, 1, 1, 1}, data, 4));
  EXPECT_REFUSED("invalid dimension 0", w.add_tensor("t", DType::F32, {4, 0}, data, 0));
  EXPECT_REFUSED("longer than 63 bytes",
                 w.add_tensor(std::string(64, 'x'), DType::F32, {1}, data, 4));
  EXPECT_REFUSED("not valid UTF-8", w.add_tensor("\xc3", DType::F32, {1}, data, 4));
}

}  // namespace
}  // namespace deferkv
