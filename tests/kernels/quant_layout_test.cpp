// One block of each quantised type built by hand, byte by byte, following the ggml
// layout as documented (not through quantize_row), then decoded by dequantize_row and by
// every SIMD matvec kernel. A layout mistake that a quantise/dequantise round trip would
// hide (both sides wrong the same way) fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matvec.h"
#include "kernels/packed_activation.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace deferkv {
namespace {

using testing::for_each_simd_target;

// Activation whose packed form is exact: integers in [-qmax, qmax] with +-qmax in every
// 32 values, so each block's scale is exactly 1 (qmax from packed_activation.h).
std::vector<float> exact_activation(int64_t n, int qmax) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % (2 * qmax + 1) - qmax);
  for (int64_t i = 0; i < n; i += 32) x[i] = static_cast<float>((i / 32) % 2 ? -qmax : qmax);
  return x;
}

// Checks dequantize_row against `expected`, then matvec (every target) against the
// float64 dot product of `expected` with exact_activation.
void check_block(DType type, const void* block, const std::vector<float>& expected) {
  const auto n = static_cast<int64_t>(expected.size());
  std::vector<float> decoded(expected.size());
  dequantize_row(type, block, decoded.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(decoded[i], expected[i]) << "value " << i;

  // K-quants with each form of the activation (matvec.h's KQuantActivation): the int8 one
  // has its own qmax, and kernels of their own (matvec_int8_test.cpp covers AVX3_DL's).
  const KQuantActivation previous = kquant_activation();
  for (KQuantActivation form : {KQuantActivation::kInt16, KQuantActivation::kInt8}) {
    set_kquant_activation(form);
    SCOPED_TRACE(form == KQuantActivation::kInt8 ? "int8 activation" : "int16 activation");
    const int qmax = takes_int8_activation(type) ? kPackedMaxInt8 : n == 256 ? kPackedMax256 : kPackedMax32;
    const std::vector<float> x = exact_activation(n, qmax);
    double want = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(expected[i]) * x[i];
      magnitude += std::fabs(static_cast<double>(expected[i]) * x[i]);
    }
    std::vector<unsigned char> packed(packed_activation_bytes(type, n));
    for_each_simd_target([&](const char*) {
      pack_activation(type, x.data(), n, packed.data());
      float y = 0;
      matvec(type, block, static_cast<size_t>(dtype_row_bytes(type, n)), n, packed.data(), &y, 1);
      EXPECT_NEAR(y, want, 1e-6 * magnitude);
    });
  }
  set_kquant_activation(previous);
}

TEST(QuantLayout, Q4_0) {
  BlockQ4_0 block;
  block.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> expected(32);
  for (int j = 0; j < 16; ++j) {
    expected[j] = (j - 8) * 0.5f;         // low nibble: values 0-15
    expected[j + 16] = (7 - j) * 0.5f;    // high nibble: values 16-31
  }
  EXPECT_EQ(expected[0], -4.0f);
  EXPECT_EQ(expected[31], -4.0f);
  check_block(DType::Q4_0, &block, expected);
}

TEST(QuantLayout, Q8_0) {
  BlockQ8_0 block;
  block.d = 0x3400;  // 0.25
  for (int j = 0; j < 32; ++j) block.qs[j] = static_cast<int8_t>(j * 8 - 128);
  std::vector<float> expected(32);
  for (int j = 0; j < 32; ++j) expected[j] = (j * 8 - 128) * 0.25f;
  EXPECT_EQ(expected[0], -32.0f);
  check_block(DType::Q8_0, &block, expected);
}

// Six-bit scales and mins shared by the Q4_K and Q5_K blocks, with the 12 bytes that
// store them worked out by hand from ggml's get_scale_min_k4.
constexpr uint8_t kSc[8] = {1, 17, 33, 63, 5, 21, 40, 60};
constexpr uint8_t kMin[8] = {0, 10, 20, 30, 47, 50, 16, 63};
constexpr uint8_t kScaleBytes[12] = {1, 81, 161, 255, 128, 202, 84, 222, 245, 37, 8, 252};

// Nibble pattern: qs[32c + l] = (l % 16) | (((l + c) % 16) << 4).
uint8_t k4_nibbles(int c, int l) { return static_cast<uint8_t>((l % 16) | (((l + c) % 16) << 4)); }

// Value e of a 256-block: chunk c = e / 64; the first 32 of a chunk are sub-block 2c
// (low nibbles), the next 32 sub-block 2c+1 (high nibbles).
struct K4Position {
  int sub_block;
  int l;  // index into the chunk's 32 bytes
  bool high;
};
K4Position k4_position(int e) {
  const int c = e / 64, l = e % 64;
  return l < 32 ? K4Position{2 * c, l, false} : K4Position{2 * c + 1, l - 32, true};
}

TEST(QuantLayout, ScaleBytesDecode) {
  const ScalesK4 s = unpack_scales_k4(kScaleBytes);
  uint8_t packed[12];
  pack_scales_k4(s, packed);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(s.sc[j], kSc[j]) << j;
    EXPECT_EQ(s.m[j], kMin[j]) << j;
  }
  EXPECT_EQ(std::memcmp(packed, kScaleBytes, 12), 0);
}

TEST(QuantLayout, Q4_K) {
  BlockQ4_K block;
  block.d = 0x4000;     // 2.0
  block.dmin = 0x3800;  // 0.5
  std::memcpy(block.scales, kScaleBytes, 12);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) block.qs[32 * c + l] = k4_nibbles(c, l);
  }
  std::vector<float> expected(256);
  for (int e = 0; e < 256; ++e) {
    const K4Position p = k4_position(e);
    const uint8_t byte = block.qs[32 * (e / 64) + p.l];
    const int q = p.high ? byte >> 4 : byte & 15;
    expected[e] = 2.0f * kSc[p.sub_block] * q - 0.5f * kMin[p.sub_block];
  }
  EXPECT_EQ(expected[5], 10.0f);     // sub-block 0: 2 * 1 * 5 - 0
  EXPECT_EQ(expected[40], 267.0f);   // sub-block 1: 2 * 17 * 8 - 0.5 * 10
  EXPECT_EQ(expected[200], 632.0f);  // sub-block 6: 2 * 40 * 8 - 0.5 * 16
  EXPECT_EQ(expected[255], 208.5f);  // sub-block 7: 2 * 60 * 2 - 0.5 * 63
  check_block(DType::Q4_K, &block, expected);
}

TEST(QuantLayout, Q5_K) {
  BlockQ5_K block;
  block.d = 0x4000;
  block.dmin = 0x3800;
  std::memcpy(block.scales, kScaleBytes, 12);
  for (int l = 0; l < 32; ++l) block.qh[l] = static_cast<uint8_t>(l * 37 + 11);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) block.qs[32 * c + l] = k4_nibbles(c, l);
  }
  std::vector<float> expected(256);
  for (int e = 0; e < 256; ++e) {
    const K4Position p = k4_position(e);
    const uint8_t byte = block.qs[32 * (e / 64) + p.l];
    const int fifth_bit = (block.qh[p.l] >> p.sub_block) & 1;  // bit 2c or 2c+1
    const int q = (p.high ? byte >> 4 : byte & 15) + 16 * fifth_bit;
    expected[e] = 2.0f * kSc[p.sub_block] * q - 0.5f * kMin[p.sub_block];
  }
  EXPECT_EQ(expected[0], 32.0f);      // qh[0] = 11: bit 0 set, q = 16
  EXPECT_EQ(expected[40], 811.0f);    // qh[8] = 51: bit 1 set, q = 24
  EXPECT_EQ(expected[255], 2128.5f);  // qh[31] = 134: bit 7 set, q = 18
  check_block(DType::Q5_K, &block, expected);
}

TEST(QuantLayout, Q6_K) {
  BlockQ6_K block;
  for (int i = 0; i < 128; ++i) block.ql[i] = static_cast<uint8_t>(i * 29 + 3);
  for (int i = 0; i < 64; ++i) block.qh[i] = static_cast<uint8_t>(i * 53 + 7);
  for (int s = 0; s < 16; ++s) block.scales[s] = static_cast<int8_t>(s * 9 - 70);
  block.d = 0x3800;  // 0.5
  std::vector<float> expected(256);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, group = (e % 128) / 32, l = e % 32;
    const uint8_t low = block.ql[64 * half + l + (group % 2) * 32];
    const int nibble = group < 2 ? low & 15 : low >> 4;
    const int top = (block.qh[32 * half + l] >> (2 * group)) & 3;
    expected[e] = 0.5f * static_cast<float>(block.scales[e / 16] * ((nibble | (top << 4)) - 32));
  }
  EXPECT_EQ(expected[0], -665.0f);    // q = 3 | 3 << 4 = 51, scale -70
  EXPECT_EQ(expected[200], -570.0f);  // q = 2, scale 38
  check_block(DType::Q6_K, &block, expected);
}

}  // namespace
}  // namespace deferkv
