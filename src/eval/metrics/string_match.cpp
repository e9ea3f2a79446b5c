#include "eval/metrics/string_match.h"

#include "deferkv/error.h"
#include "eval/metrics/python_text.h"

namespace deferkv::eval {

std::string ruler_postprocess(std::string_view prediction) {
  std::string out(python_strip(prediction));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = '\n';
  }
  return std::string(python_strip(out));
}

bool contains_ignoring_case(std::string_view prediction, std::string_view reference) {
  return python_lower(prediction).find(python_lower(reference)) != std::string::npos;
}

double string_match_all(std::string_view prediction, const std::vector<std::string>& references) {
  if (references.empty()) fail("string_match_all needs at least one reference");
  // sum() of 1.0s, then divided by len(ref), as constants.py writes it.
  double found = 0;
  for (const std::string& r : references) found += contains_ignoring_case(prediction, r) ? 1.0 : 0.0;
  return found / static_cast<double>(references.size());
}

double string_match_part(std::string_view prediction, const std::vector<std::string>& references) {
  if (references.empty()) fail("string_match_part needs at least one reference");
  for (const std::string& r : references) {
    if (contains_ignoring_case(prediction, r)) return 1.0;
  }
  return 0.0;
}

}  // namespace deferkv::eval
