#pragma once
// Reading one value out of a server's /metrics (Prometheus' text format).
#include <optional>
#include <string_view>

namespace deferkv::client {

// The value of the sample `name` without labels ("name 12" or "name 12 <timestamp>"), or
// nullopt when the text has no such line or its value is not a number. Comments (# HELP,
// # TYPE) and samples with labels (name{le="1"} …) are not matched.
std::optional<double> metric_value(std::string_view text, std::string_view name);

}  // namespace deferkv::client
