#pragma once
// Metadata values of a GGUF file: every GGUF value type, arrays included.
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace deferkv {

// GGUF metadata value types, numbered as in the file format.
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

const char* gguf_type_name(GgufType type);
bool gguf_type_is_unsigned(GgufType type);
bool gguf_type_is_signed(GgufType type);
bool gguf_type_is_float(GgufType type);

struct GgufArray;

// One metadata value. Integers are widened to 64 bits and floats to double; `type`
// keeps the type the file stored, so a writer can reproduce it.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<const GgufArray>> data;

  // Typed reads; each throws an Error naming `what` when the value has another type.
  uint64_t as_u64(const std::string& what) const;
  int64_t as_i64(const std::string& what) const;
  double as_f64(const std::string& what) const;
  bool as_bool(const std::string& what) const;
  const std::string& as_string(const std::string& what) const;
  const GgufArray& as_array(const std::string& what) const;


  static GgufValue of_u32(uint32_t v) { return {GgufType::UINT32, uint64_t{v}}; }
  static GgufValue of_u64(uint64_t v) { return {GgufType::UINT64, v}; }
  static GgufValue of_i32(int32_t v) { return {GgufType::INT32, int64_t{v}}; }
  static GgufValue of_f32(float v) { return {GgufType::FLOAT32, double{v}}; }
  static GgufValue of_bool(bool v) { return {GgufType::BOOL, v}; }
  static GgufValue of_string(std::string v) { return {GgufType::STRING, std::move(v)}; }
  static GgufValue of_array(GgufType elem_type, std::vector<GgufValue> items);
};

struct GgufArray {
  GgufType elem_type = GgufType::UINT8;
  std::vector<GgufValue> items;

  std::vector<std::string> strings(const std::string& what) const;
  std::vector<float> floats(const std::string& what) const;
  std::vector<int64_t> ints(const std::string& what) const;
};

}  // namespace deferkv
