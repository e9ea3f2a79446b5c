#include "press/core/compresskv_profile.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "deferkv/error.h"

namespace deferkv {

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
    p.n_layer = j.at("model").at("n_layer").get<int64_t>();
    p.n_head = j.at("model").at("n_head").get<int64_t>();
    p.retrieval_heads = j.at("retrieval_heads").get<std::vector<std::vector<int64_t>>>();
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
