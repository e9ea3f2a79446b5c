#include "press/methods/behavior_preserving/reference_capture.h"

#include <algorithm>

#include "observe/attention_tap.h"
#include "observe/residual_tap.h"

namespace deferkv {

ReferencePosition& ReferenceCapture::entry(int32_t position) {
  auto [it, inserted] = captured_.try_emplace(position);
  it->second.position = position;
  return it->second;
}

void ReferenceCapture::keep_newest() {
  while (static_cast<int64_t>(captured_.size()) > m_) captured_.erase(captured_.begin());
}

void ReferenceCapture::add_queries(const AttentionEvent& event) {
  if (event.layer == 0) forget_from(event.positions[0]);
  const int64_t width = event.shape.n_head * event.shape.head_dim;
  for (int64_t i = std::max<int64_t>(0, event.n - m_); i < event.n; ++i) {
    ReferencePosition& ref = entry(event.positions[i]);
    if (static_cast<int64_t>(ref.queries.size()) <= event.layer) ref.queries.resize(static_cast<size_t>(event.layer) + 1);
    ref.queries[static_cast<size_t>(event.layer)].assign(event.queries + i * width, event.queries + (i + 1) * width);
  }
  keep_newest();
}

void ReferenceCapture::add_residuals(const ResidualEvent& event) {
  for (int64_t i = std::max<int64_t>(0, event.n - m_); i < event.n; ++i) {
    entry(event.positions[i]).residual.assign(event.residual + i * event.n_embd, event.residual + (i + 1) * event.n_embd);
  }
  keep_newest();
}

void ReferenceCapture::forget_from(int32_t position) {
  captured_.erase(captured_.lower_bound(position), captured_.end());
}

std::vector<const ReferencePosition*> ReferenceCapture::complete(int64_t n_layer) const {
  std::vector<const ReferencePosition*> out;
  for (const auto& [position, ref] : captured_) {
    const bool has_queries = static_cast<int64_t>(ref.queries.size()) >= n_layer &&
                             std::none_of(ref.queries.begin(), ref.queries.begin() + n_layer,
                                          [](const auto& q) { return q.empty(); });
    if (!ref.residual.empty() && has_queries) out.push_back(&ref);
  }
  return out;
}

}  // namespace deferkv
