// `deferkv inspect`: a GGUF file's header, metadata and tensor table, as text (in the
// manner of gguf-dump) or as one JSON object, and its mix: which types each kind of tensor
// has in which blocks (llama.cpp's Q4_K_M keeps some at Q6_K), with the totals per type.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "commands.h"
#include "deferkv/error.h"
#include "common_options.h"
#include "model/weight_mix.h"
#include "tensor/gguf_file.h"

namespace deferkv::cli {
namespace {

// How much of a long value is shown unless --all-values.
constexpr size_t kShownItems = 8;
constexpr size_t kShownBytes = 100;

using Json = nlohmann::ordered_json;

struct InspectArgs {
  std::string model;
  std::string file;  // the positional argument
  bool json = false;
  bool all_values = false;
};

// Abbreviates values as asked and remembers whether it had to.
struct Abbreviator {
  bool all_values;
  bool abbreviated = false;

  size_t items_shown(size_t count) {
    if (all_values || count <= kShownItems) return count;
    abbreviated = true;
    return kShownItems;
  }

  // The string cut to kShownBytes without splitting a UTF-8 sequence.
  std::string text(const std::string& s) {
    if (all_values || s.size() <= kShownBytes) return s;
    abbreviated = true;
    size_t end = kShownBytes;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
    return s.substr(0, end);
  }
};

const GgufArray& array_of(const GgufValue& value) {
  return *std::get<std::shared_ptr<const GgufArray>>(value.data);
}

// "UINT32", or "STRING[512]" for an array.
std::string type_text(const GgufValue& value) {
  if (value.type != GgufType::ARRAY) return gguf_type_name(value.type);
  const GgufArray& array = array_of(value);
  return fmt::format("{}[{}]", gguf_type_name(array.elem_type), array.items.size());
}

// A string in double quotes with control characters (and, in invalid UTF-8, every byte
// above ASCII) escaped, so that one value stays on one line of the terminal.
std::string escaped(const std::string& s) {
  const bool utf8 = is_valid_utf8(s);
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !utf8)) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string value_text(const GgufValue& value, Abbreviator& abbrev) {
  switch (value.type) {
    case GgufType::STRING: {
      const std::string& s = std::get<std::string>(value.data);
      std::string shown = abbrev.text(s);
      return shown.size() < s.size() ? escaped(shown) + "..." : escaped(shown);
    }
    case GgufType::BOOL:
      return std::get<bool>(value.data) ? "true" : "false";
    case GgufType::FLOAT32:
      return fmt::format("{}", static_cast<float>(std::get<double>(value.data)));
    case GgufType::FLOAT64:
      return fmt::format("{}", std::get<double>(value.data));
    case GgufType::ARRAY: {
      const GgufArray& array = array_of(value);
      size_t shown = abbrev.items_shown(array.items.size());
      std::string text = "[";
      for (size_t i = 0; i < shown; ++i)
        text += (i ? ", " : "") + value_text(array.items[i], abbrev);
      if (shown < array.items.size())
        text += fmt::format(", ... ({} more)", array.items.size() - shown);
      return text + "]";
    }
    default:
      return gguf_type_is_signed(value.type) ? fmt::format("{}", std::get<int64_t>(value.data))
                                             : fmt::format("{}", std::get<uint64_t>(value.data));
  }
}

Json value_json(const GgufValue& value, Abbreviator& abbrev) {
  switch (value.type) {
    case GgufType::STRING:
      return abbrev.text(std::get<std::string>(value.data));
    case GgufType::BOOL:
      return std::get<bool>(value.data);
    // The float's shortest decimal form, so that 1e-5f shows as 1e-05, not 9.99999974e-06.
    case GgufType::FLOAT32:
      return std::stod(fmt::format("{}", static_cast<float>(std::get<double>(value.data))));
    case GgufType::FLOAT64:
      return std::get<double>(value.data);
    case GgufType::ARRAY: {
      const GgufArray& array = array_of(value);
      Json items = Json::array();
      size_t shown = abbrev.items_shown(array.items.size());
      for (size_t i = 0; i < shown; ++i) items.push_back(value_json(array.items[i], abbrev));
      return items;
    }
    default:
      if (gguf_type_is_signed(value.type)) return std::get<int64_t>(value.data);
      return std::get<uint64_t>(value.data);
  }
}

struct TypeTotal {
  int64_t tensors = 0;
  int64_t params = 0;
  uint64_t bytes = 0;
};

// Tensors, parameters and bytes per tensor type, by type name.
std::map<std::string, TypeTotal> totals_by_type(const GgufFile& file) {
  std::map<std::string, TypeTotal> totals;
  for (const auto& t : file.tensors()) {
    TypeTotal& total = totals[ggml_type_name(t.ggml_type)];
    total.tensors += 1;
    total.params += t.n_elements();
    total.bytes += t.nbytes;
  }
  return totals;
}

// The mix of a file: for each tensor name with its block number taken out
// ("blk.*.attn_v.weight"), the types its tensors have and in which blocks, in file order,
// so that llama.cpp's mixes (which blocks got Q6_K) read at a glance.
struct RoleTypes {
  std::string type;
  int64_t tensors = 0;
  std::vector<int64_t> blocks;  // empty for a tensor outside the blocks
};

struct Role {
  std::string name;
  std::vector<RoleTypes> types;  // by first appearance
};

std::vector<Role> mix_of(const GgufFile& file) {
  std::vector<Role> roles;
  for (const auto& t : file.tensors()) {
    std::string name = t.name;
    int64_t block = -1;
    if (name.rfind("blk.", 0) == 0) {
      const size_t dot = name.find('.', 4);
      const std::string digits = name.substr(4, dot == std::string::npos ? std::string::npos : dot - 4);
      if (dot != std::string::npos && !digits.empty() && digits.size() < 10 &&
          digits.find_first_not_of("0123456789") == std::string::npos) {
        block = std::stoll(digits);
        name = "blk.*" + name.substr(dot);
      }
    }
    auto role = std::find_if(roles.begin(), roles.end(), [&](const Role& r) { return r.name == name; });
    if (role == roles.end()) role = roles.insert(roles.end(), Role{name, {}});
    const std::string type = ggml_type_name(t.ggml_type);
    auto types = std::find_if(role->types.begin(), role->types.end(), [&](const RoleTypes& r) { return r.type == type; });
    if (types == role->types.end()) types = role->types.insert(role->types.end(), RoleTypes{type, 0, {}});
    types->tensors += 1;
    if (block >= 0) types->blocks.push_back(block);
  }
  return roles;
}

// "Q4_K_M" for general.file_type 15; "" when the file has none or llama.h has no name for it.
std::string file_type_name(const GgufFile& file, uint64_t* file_type) {
  const GgufValue* value = file.find("general.file_type");
  if (value == nullptr || value->type == GgufType::ARRAY || value->type == GgufType::STRING) return "";
  try {
    *file_type = value->as_u64("general.file_type");
  } catch (const Error&) {
    return "";
  }
  auto name = *file_type <= UINT32_MAX ? llama_file_type_name(static_cast<uint32_t>(*file_type)) : std::nullopt;
  return name ? *name : "";
}

Json mix_json(const GgufFile& file) {
  Json roles = Json::array();
  for (const Role& role : mix_of(file)) {
    Json types = Json::object();
    for (const RoleTypes& t : role.types) types[t.type] = {{"tensors", t.tensors}, {"blocks", t.blocks}};
    roles.push_back({{"name", role.name}, {"types", std::move(types)}});
  }
  uint64_t file_type = 0;
  const std::string name = file_type_name(file, &file_type);
  Json mix = Json::object();
  mix["file_type"] = file.find("general.file_type") ? Json(file_type) : Json(nullptr);
  mix["file_type_name"] = name.empty() ? Json(nullptr) : Json(name);
  mix["tensors"] = std::move(roles);
  return mix;
}

Json inspect_json(const GgufFile& file, bool all_values) {
  Json metadata = Json::array();
  for (const auto& [key, value] : file.metadata()) {
    Abbreviator abbrev{all_values};
    Json entry = {{"key", key}, {"type", gguf_type_name(value.type)}};
    if (value.type == GgufType::ARRAY) {
      entry["element_type"] = gguf_type_name(array_of(value).elem_type);
      entry["count"] = array_of(value).items.size();
    }
    entry["value"] = value_json(value, abbrev);
    entry["abbreviated"] = abbrev.abbreviated;
    metadata.push_back(std::move(entry));
  }
  Json tensors = Json::array();
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const GgufTensorInfo& t = file.tensors()[i];
    tensors.push_back({{"index", i},
                       {"name", t.name},
                       {"type", ggml_type_name(t.ggml_type)},
                       {"type_id", t.ggml_type},
                       {"shape", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                       {"n_elements", t.n_elements()},
                       {"offset", t.offset},
                       {"bytes", t.nbytes}});
  }
  Json by_type = Json::object();
  TypeTotal all;
  for (const auto& [name, total] : totals_by_type(file)) {
    by_type[name] = {{"tensors", total.tensors}, {"params", total.params}, {"bytes", total.bytes}};
    all.tensors += total.tensors, all.params += total.params, all.bytes += total.bytes;
  }
  return {{"file", file.path()},
          {"version", file.version()},
          {"file_size", file.file_size()},
          {"alignment", file.alignment()},
          {"data_offset", file.data_offset()},
          {"metadata", std::move(metadata)},
          {"tensors", std::move(tensors)},
          {"mix", mix_json(file)},
          {"totals",
           {{"tensors", all.tensors},
            {"params", all.params},
            {"bytes", all.bytes},
            {"by_type", by_type}}}};
}

void print_text(const GgufFile& file, bool all_values, std::ostream& out) {
  out << fmt::format("{}: GGUF version {}, {} bytes, alignment {}, data offset {}\n", file.path(),
                     file.version(), file.file_size(), file.alignment(), file.data_offset());

  size_t key_width = 3, type_width = 4;
  for (const auto& [key, value] : file.metadata()) {
    key_width = std::max(key_width, key.size());
    type_width = std::max(type_width, type_text(value).size());
  }
  out << fmt::format("\n{} metadata entries:\n", file.metadata().size());
  out << fmt::format("{:>5}  {:<{}}  {:<{}}  {}\n", "#", "key", key_width, "type", type_width,
                     "value");
  for (size_t i = 0; i < file.metadata().size(); ++i) {
    const auto& [key, value] = file.metadata()[i];
    Abbreviator abbrev{all_values};
    out << fmt::format("{:>5}  {:<{}}  {:<{}}  {}\n", i, key, key_width, type_text(value),
                       type_width, value_text(value, abbrev));
  }

  size_t name_width = 4, shape_width = 5;
  for (const auto& t : file.tensors()) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, t.shape_string().size());
  }
  out << fmt::format("\n{} tensors:\n", file.tensors().size());
  out << fmt::format("{:>5}  {:<{}}  {:<7}  {:<{}}  {:>12}  {:>12}\n", "#", "name", name_width,
                     "type", "shape", shape_width, "offset", "bytes");
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const GgufTensorInfo& t = file.tensors()[i];
    out << fmt::format("{:>5}  {:<{}}  {:<7}  {:<{}}  {:>12}  {:>12}\n", i, t.name, name_width,
                       ggml_type_name(t.ggml_type), t.shape_string(), shape_width, t.offset,
                       t.nbytes);
  }

  uint64_t file_type = 0;
  const std::string type_name = file_type_name(file, &file_type);
  const std::vector<Role> roles = mix_of(file);
  size_t role_width = 4;
  for (const Role& role : roles) role_width = std::max(role_width, role.name.size());
  out << (type_name.empty() ? std::string("\nmix:\n")
                            : fmt::format("\nmix (general.file_type {}: {}):\n", file_type, type_name));
  for (const Role& role : roles) {
    std::string types;
    for (const RoleTypes& t : role.types) {
      if (!types.empty()) types += "; ";
      types += t.type;
      // Which blocks, when the blocks' tensors of this name are not all of one type.
      if (role.types.size() > 1 && !t.blocks.empty()) types += fmt::format(" in blocks {}", fmt::join(t.blocks, ", "));
    }
    out << fmt::format("  {:<{}}  {}\n", role.name, role_width, types);
  }

  TypeTotal all;
  out << "\ntotals:\n";
  for (const auto& [name, total] : totals_by_type(file)) {
    out << fmt::format("  {:<7}  {:>6} tensors  {:>14} params  {:>14} bytes\n", name, total.tensors,
                       total.params, total.bytes);
    all.tensors += total.tensors, all.params += total.params, all.bytes += total.bytes;
  }
  out << fmt::format("  {:<7}  {:>6} tensors  {:>14} params  {:>14} bytes\n", "all", all.tensors,
                     all.params, all.bytes);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print a GGUF file's header, metadata and tensors");
  add_model_option(*cmd, args->model);
  // As gguf-dump takes it: `deferkv inspect model.gguf`.
  cmd->add_option("file", args->file, "GGUF file (instead of -m)");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_flag("--all-values", args->all_values, "Print long strings and arrays in full");
  cmd->callback([args, cmd] {
    if (!args->file.empty() && cmd->count("--model") > 0) fail("give the file once: as an argument or with -m");
    GgufFile file(args->file.empty() ? args->model : args->file);
    if (args->json) {
      // Strings in GGUF need not be UTF-8; JSON must be.
      std::cout << inspect_json(file, args->all_values)
                       .dump(2, ' ', false, Json::error_handler_t::replace)
                << '\n';
    } else {
      print_text(file, args->all_values, std::cout);
    }
    std::cout.flush();
  });
}

}  // namespace deferkv::cli
