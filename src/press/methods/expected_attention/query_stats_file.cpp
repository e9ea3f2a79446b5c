#include "press/methods/expected_attention/query_stats_file.h"

#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deferkv/error.h"
#include "tensor/safetensors_file.h"

namespace deferkv {
namespace {

constexpr const char* kQueryStatsFile = "Expected Attention statistics file";

}  // namespace

QueryStatsFile QueryStatsFile::load(const std::string& path, HeadDimOrder order) {
  std::unique_ptr<SafetensorsFile> file;
  try {
    file = std::make_unique<SafetensorsFile>(trained_safetensors_path(path));
  } catch (const Error& e) {
    fail("cannot read the {} '{}': {}", kQueryStatsFile, path, e.what());
  }
  QueryStatsFile s;
  s.path_ = path;
  s.order_ = order;
  s.mean_ = read_trained_tensor(*file, kQueryStatsFile, "query_mean", 3);
  const std::vector<int64_t>& m = s.mean_.shape;
  // The covariance's shape is checked before its values are converted.
  const SafetensorsTensor* cov = file->find("query_cov");
  const std::vector<int64_t> want = {m[0], m[1], m[2], m[2]};
  if (cov != nullptr && cov->shape != want) {
    fail("{} '{}': query_cov has shape [{}], expected [{}, {}, {}, {}] to match query_mean [{}, {}, {}]", kQueryStatsFile, path,
         fmt::join(cov->shape, ", "), m[0], m[1], m[2], m[2], m[0], m[1], m[2]);
  }
  s.cov_ = read_trained_tensor(*file, kQueryStatsFile, "query_cov", 4);
  return s;
}

void QueryStatsFile::check_fits(const PressModelShape& shape) const {
  const std::vector<int64_t>& m = mean_.shape;
  const std::vector<int64_t> want = {shape.n_layer, shape.n_head, shape.head_dim};
  static const char* const names[] = {"layers", "query heads", "head_dim"};
  for (size_t i = 0; i < want.size(); ++i) {
    if (m[i] != want[i]) {
      fail("{} '{}': query_mean has shape [{}, {}, {}] (layers, query heads, head_dim), but the model has {} {}", kQueryStatsFile,
           path_, m[0], m[1], m[2], want[i], names[i]);
    }
  }
}

std::vector<double> QueryStatsFile::mean(int64_t layer, int64_t h, bool interleaved_rope) const {
  const int64_t d = mean_.shape[2];
  const float* row = mean_.values.data() + (layer * n_head() + h) * d;
  std::vector<double> mu(static_cast<size_t>(d));
  for (int64_t a = 0; a < d; ++a) mu[a] = row[file_head_dim(a, d, order_, interleaved_rope)];
  return mu;
}

std::vector<double> QueryStatsFile::covariance(int64_t layer, int64_t h, bool interleaved_rope) const {
  const int64_t d = mean_.shape[2];
  const float* block = cov_.values.data() + (layer * n_head() + h) * d * d;
  std::vector<double> sigma(static_cast<size_t>(d * d));
  for (int64_t a = 0; a < d; ++a) {
    const int64_t fa = file_head_dim(a, d, order_, interleaved_rope);
    for (int64_t b = 0; b < d; ++b) sigma[a * d + b] = block[fa * d + file_head_dim(b, d, order_, interleaved_rope)];
  }
  return sigma;
}

}  // namespace deferkv
