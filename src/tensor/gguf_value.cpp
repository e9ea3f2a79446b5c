#include "tensor/gguf_value.h"

#include <fmt/format.h>

#include "deferkv/error.h"

namespace deferkv {

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::UINT8: return "UINT8";
    case GgufType::INT8: return "INT8";
    case GgufType::UINT16: return "UINT16";
    case GgufType::INT16: return "INT16";
    case GgufType::UINT32: return "UINT32";
    case GgufType::INT32: return "INT32";
    case GgufType::FLOAT32: return "FLOAT32";
    case GgufType::BOOL: return "BOOL";
    case GgufType::STRING: return "STRING";
    case GgufType::ARRAY: return "ARRAY";
    case GgufType::UINT64: return "UINT64";
    case GgufType::INT64: return "INT64";
    case GgufType::FLOAT64: return "FLOAT64";
  }
  return "UNKNOWN";
}

bool gguf_type_is_unsigned(GgufType type) {
  return type == GgufType::UINT8 || type == GgufType::UINT16 || type == GgufType::UINT32 ||
         type == GgufType::UINT64;
}
bool gguf_type_is_signed(GgufType type) {
  return type == GgufType::INT8 || type == GgufType::INT16 || type == GgufType::INT32 ||
         type == GgufType::INT64;
}
bool gguf_type_is_float(GgufType type) {
  return type == GgufType::FLOAT32 || type == GgufType::FLOAT64;
}

uint64_t GgufValue::as_u64(const std::string& what) const {
  if (gguf_type_is_unsigned(type)) return std::get<uint64_t>(data);
  if (gguf_type_is_signed(type) && std::get<int64_t>(data) >= 0) {
    return static_cast<uint64_t>(std::get<int64_t>(data));
  }
  fail("metadata '{}' should be a non-negative integer but is {}", what, gguf_type_name(type));
}

int64_t GgufValue::as_i64(const std::string& what) const {
  if (gguf_type_is_signed(type)) return std::get<int64_t>(data);
  if (gguf_type_is_unsigned(type)) {
    uint64_t v = std::get<uint64_t>(data);
    if (v <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(v);
  }
  fail("metadata '{}' should be an integer but is {}", what, gguf_type_name(type));
}

double GgufValue::as_f64(const std::string& what) const {
  if (gguf_type_is_float(type)) return std::get<double>(data);
  if (gguf_type_is_signed(type)) return static_cast<double>(std::get<int64_t>(data));
  if (gguf_type_is_unsigned(type)) return static_cast<double>(std::get<uint64_t>(data));
  fail("metadata '{}' should be a number but is {}", what, gguf_type_name(type));
}

bool GgufValue::as_bool(const std::string& what) const {
  if (type != GgufType::BOOL) {
    fail("metadata '{}' should be BOOL but is {}", what, gguf_type_name(type));
  }
  return std::get<bool>(data);
}

const std::string& GgufValue::as_string(const std::string& what) const {
  if (type != GgufType::STRING) {
    fail("metadata '{}' should be STRING but is {}", what, gguf_type_name(type));
  }
  return std::get<std::string>(data);
}

const GgufArray& GgufValue::as_array(const std::string& what) const {
  if (type != GgufType::ARRAY) {
    fail("metadata '{}' should be ARRAY but is {}", what, gguf_type_name(type));
  }
  return *std::get<std::shared_ptr<const GgufArray>>(data);
}

GgufValue GgufValue::of_array(GgufType elem_type, std::vector<GgufValue> items) {
  auto array = std::make_shared<GgufArray>();
  array->elem_type = elem_type;
  array->items = std::move(items);
  return {GgufType::ARRAY, std::shared_ptr<const GgufArray>(std::move(array))};
}

std::vector<std::string> GgufArray::strings(const std::string& what) const {
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(item.as_string(what));
  return out;
}

std::vector<float> GgufArray::floats(const std::string& what) const {
  std::vector<float> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(static_cast<float>(item.as_f64(what)));
  return out;
}

std::vector<int64_t> GgufArray::ints(const std::string& what) const {
  std::vector<int64_t> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(item.as_i64(what));
  return out;
}

}  // namespace deferkv
