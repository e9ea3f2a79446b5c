#include "press/core/compresskv_profile.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "deferkv/error.h"
#include "tensor/json_numbers.h"

namespace deferkv {

namespace {

// An integer of the file, or an error naming the field (json_numbers.h says why).
int64_t whole_number(const nlohmann::json& value, const char* field, const std::string& path) {
  if (const std::optional<int64_t> v = json_whole_number(value)) return *v;
  fail("CompressKV profile '{}': {} holds {}, not a whole number", path, field, value.dump());
}

}  // namespace

CompressKvProfile load_compresskv_profile(const std::string& path) {
  // A folder opens as a stream whose first read throws std::ios_base::failure; the
  // error_code overload, because a name too long for the system throws otherwise.
  std::error_code error;
  std::ifstream in(path);
  if (!std::filesystem::is_regular_file(path, error) || !in) fail("cannot read the CompressKV profile '{}'", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    if (j.value("format", "") != "deferkv-compresskv-profile/1") {
      fail("'{}' is not a CompressKV profile (format must be \"deferkv-compresskv-profile/1\")", path);
    }
    CompressKvProfile p;
    p.model_name = j.at("model").value("name", "");
    p.n_layer = whole_number(j.at("model").at("n_layer"), "model.n_layer", path);
    p.n_head = whole_number(j.at("model").at("n_head"), "model.n_head", path);
    const nlohmann::json& heads = j.at("retrieval_heads");
    if (!heads.is_array()) fail("CompressKV profile '{}': retrieval_heads is not a list", path);
    for (const nlohmann::json& layer : heads) {
      if (!layer.is_array()) fail("CompressKV profile '{}': retrieval_heads holds a non-list", path);
      std::vector<int64_t>& ids = p.retrieval_heads.emplace_back();
      for (const nlohmann::json& h : layer) ids.push_back(whole_number(h, "retrieval_heads", path));
    }
    p.layer_scores = j.at("layer_scores").get<std::vector<double>>();
    if (static_cast<int64_t>(p.retrieval_heads.size()) != p.n_layer ||
        static_cast<int64_t>(p.layer_scores.size()) != p.n_layer) {
      fail("CompressKV profile '{}': retrieval_heads and layer_scores need one entry per layer ({})", path, p.n_layer);
    }
    for (int64_t l = 0; l < p.n_layer; ++l) {
      if (p.retrieval_heads[l].empty()) fail("CompressKV profile '{}': layer {} has no retrieval heads", path, l);
      for (int64_t h : p.retrieval_heads[l]) {
        if (h < 0 || h >= p.n_head) fail("CompressKV profile '{}': layer {} names head {} of {}", path, l, h, p.n_head);
      }
      if (!(p.layer_scores[l] >= 0) || !std::isfinite(p.layer_scores[l])) {
        fail("CompressKV profile '{}': layer {} has score {}", path, l, p.layer_scores[l]);
      }
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    fail("CompressKV profile '{}' is malformed: {}", path, e.what());
  }
}

void save_compresskv_profile(const std::string& path, const CompressKvProfile& profile) {
  const nlohmann::json j = {
      {"format", "deferkv-compresskv-profile/1"},
      {"model", {{"name", profile.model_name}, {"n_layer", profile.n_layer}, {"n_head", profile.n_head}}},
      {"retrieval_heads", profile.retrieval_heads},
      {"layer_scores", profile.layer_scores},
  };
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << j.dump(2) << "\n";
    if (!out) fail("cannot write the CompressKV profile '{}'", temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("cannot rename '{}' to '{}'", temporary, path);
}

}  // namespace deferkv
