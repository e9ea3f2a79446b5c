// A plan's grid as config.json's "sweep" holds it, and back.
#include <map>

#include <fmt/format.h>

#include "deferkv/error.h"
#include "deferkv/eval_sweep.h"
#include "tensor/json_numbers.h"

namespace deferkv::eval {
namespace {

using nlohmann::ordered_json;

// "64" → per_head(64), "r0.5" → ratio(0.5): SweepMethod::budget_label read back.
KvBudget budget_of(const std::string& label) {
  try {
    if (!label.empty() && label.front() == 'r') return KvBudget::ratio(std::stod(label.substr(1)));
    return KvBudget::per_head(std::stoll(label));
  } catch (const std::logic_error&) {
    fail("config.json: '{}' is not a budget (64, r0.5)", label);
  }
}

// config.json's counts: whole numbers >= 0, or an error naming the field (json_numbers.h
// says why get<int64_t>() will not do).
int64_t count_of(const ordered_json& value, const char* field) {
  const std::optional<int64_t> v = json_whole_number(value);
  if (!v || *v < 0) fail("config.json: sweep.{} holds {}, not a whole number >= 0", field, value.dump());
  return *v;
}

std::vector<int64_t> counts_of(const ordered_json& values, const char* field) {
  if (!values.is_array()) fail("config.json: sweep.{} is {}, not a list", field, values.dump());
  std::vector<int64_t> counts;
  for (const ordered_json& v : values) counts.push_back(count_of(v, field));
  return counts;
}

}  // namespace

std::string SweepMethod::label() const { return budget ? press + "@" + budget_label : press; }

std::string SweepMethod::identity() const {
  if (!budget) return press;
  try {
    return make_press(press, *budget)->describe() + "@" + budget_label;
  } catch (const Error&) {
    return label();
  }
}

std::optional<std::string> SweepMethod::build_error() const {
  if (!budget) return std::nullopt;
  try {
    make_press(press, *budget);
    return std::nullopt;
  } catch (const Error& e) {
    return e.what();
  }
}

void check_presses_can_run(const std::vector<SweepMethod>& methods) {
  std::map<std::string, std::optional<std::string>> error_of;  // press → an error; nullopt once a budget builds it
  for (const SweepMethod& m : methods) {
    const std::optional<std::string> error = m.build_error();
    const auto it = error_of.try_emplace(m.press, error).first;
    if (!error) it->second.reset();
  }
  for (const auto& [press, error] : error_of) {
    if (error) fail("{}", *error);
  }
}

ordered_json sweep_config(const SweepPlan& plan) {
  ordered_json s;
  if (plan.benchmark == Benchmark::kNiah) {
    s["lengths"] = plan.lengths;
    s["depths"] = plan.depths;
  } else if (plan.benchmark == Benchmark::kLongBench) {
    s["datasets"] = plan.tasks;
    s["samples"] = plan.samples < 0 ? ordered_json("all") : ordered_json(plan.samples);
    s["rows"] = plan.rows;
  } else {
    s["tasks"] = plan.tasks;
    s["lengths"] = plan.lengths;
    s["samples"] = plan.samples;
  }
  ordered_json methods = ordered_json::array();
  for (const SweepMethod& m : plan.methods) {
    const std::optional<std::string> error = m.build_error();
    const std::string description = !m.budget ? std::string("full cache, no compression")
                                    : error   ? "cannot run: " + *error
                                              : make_press(m.press, *m.budget)->describe() + " with " + m.budget->describe();
    methods.push_back({{"label", m.label()}, {"press", m.press}, {"budget", m.budget_label},
                       {"params", m.identity()}, {"description", description}});
  }
  s["methods"] = methods;
  return s;
}

SweepPlan plan_from_config(const ordered_json& config) {
  try {
    SweepPlan plan;
    plan.benchmark = benchmark_from_name(config.at("benchmark").get<std::string>());
    const ordered_json& s = config.at("sweep");
    if (plan.benchmark == Benchmark::kLongBench) {
      plan.tasks = s.at("datasets").get<std::vector<std::string>>();
      plan.samples = s.at("samples") == "all" ? -1 : count_of(s.at("samples"), "samples");
      plan.rows = counts_of(s.at("rows"), "rows");
    } else {
      plan.lengths = counts_of(s.at("lengths"), "lengths");
      if (plan.benchmark == Benchmark::kNiah) {
        if (!s.at("depths").is_array()) fail("config.json: sweep.depths is {}, not a list", s.at("depths").dump());
        for (const ordered_json& depth : s.at("depths")) {
          const std::optional<double> d = json_finite_number(depth);
          if (!d || *d < 0 || *d > 100) fail("config.json: sweep.depths holds {}, not a percentage", depth.dump());
          plan.depths.push_back(*d);
        }
      } else {
        plan.tasks = s.at("tasks").get<std::vector<std::string>>();
        plan.samples = count_of(s.at("samples"), "samples");
      }
    }
    for (const auto& m : s.at("methods")) {
      const std::string press = m.at("press").get<std::string>(), budget = m.at("budget").get<std::string>();
      if (budget.empty()) {
        plan.methods.push_back({press, std::nullopt, ""});
      } else {
        plan.methods.push_back({press, budget_of(budget), budget});
      }
    }
    return plan;
  } catch (const nlohmann::json::exception& e) {
    fail("config.json does not describe a sweep (its benchmark or sweep field is missing or malformed): {}", e.what());
  }
}

}  // namespace deferkv::eval
