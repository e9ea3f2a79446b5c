// LongBench's inputs: a <dataset>.jsonl file, a prompt template filled with its rows
// (Python str.format rules), and the two configuration files dataset2prompt.json and
// dataset2maxlen.json. The input is
//   <jsonl> NUL <prompt template> NUL <dataset2prompt.json> NUL <dataset2maxlen.json>
// Asserts: only deferkv::Error escapes; no more rows than non-blank lines; a template
// without braces fills to itself; a configuration that loads answers for each dataset it
// names in dataset2prompt.json, or fails with an Error.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "deferkv/eval_longbench.h"
#include "fuzz_support.h"

using namespace deferkv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir scratch;
  const auto fields = fuzz::split_fields(fuzz::as_text(data, size));
  const std::string path = scratch.write("data.jsonl", fields[0]);
  const std::string_view prompt_template = fields.size() > 1 ? fields[1] : "{context}\n{input}";
  fuzz::accepts([&] {
    const auto rows = eval::read_longbench_file(path);
    const auto lines = std::count(fields[0].begin(), fields[0].end(), '\n') + 1;
    fuzz::require(static_cast<int64_t>(rows.size()) <= lines, "at most one row per line");
    for (const auto& row : rows) {
      std::string filled;
      if (!fuzz::accepts([&] { filled = eval::fill_longbench_prompt(prompt_template, row); })) continue;
      if (prompt_template.find_first_of("{}") == std::string_view::npos) {
        fuzz::require(filled == prompt_template, "a template without fields fills to itself");
      }
    }
  });
  if (fields.size() < 4) return 0;
  scratch.write("dataset2prompt.json", fields[2]);
  scratch.write("dataset2maxlen.json", fields[3]);
  fuzz::accepts([&] {
    const auto config = eval::LongBenchConfig::load(scratch.path());
    const auto prompts = nlohmann::json::parse(fields[2], nullptr, false);
    if (!prompts.is_object()) return;
    for (const auto& [dataset, text] : prompts.items()) {
      fuzz::accepts([&] {
        config.prompt_template(dataset);
        config.max_new_tokens(dataset);
      });
    }
  });
  return 0;
}
