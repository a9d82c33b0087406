#include "cost_table.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "common/cli_checks.hpp"
#include "input_error.hpp"

namespace specbench {

namespace fs = std::filesystem;

namespace {

/// Linear interpolation of ys at x between the xs (increasing); outside, the nearest end.
double interpolate(std::span<const int> xs, std::span<const double> ys, double x) {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back();
  const auto i = static_cast<std::size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
  const double t = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return ys[i - 1] + t * (ys[i] - ys[i - 1]);
}

/// `value` of the table's contexts interpolated at `context` as interpolate() does, without
/// building the column (the automatic budget asks this for every candidate size of every step).
template <class Value>
double across_contexts(const std::vector<CostTable::Context>& contexts, int context, Value&& value) {
  if (context <= contexts.front().context) return value(contexts.front());
  if (context >= contexts.back().context) return value(contexts.back());
  const auto above = std::upper_bound(contexts.begin(), contexts.end(), context,
                                      [](int x, const CostTable::Context& c) { return x < c.context; });
  const CostTable::Context& lo = *(above - 1);
  const double low = value(lo), high = value(*above);
  const double t = (static_cast<double>(context) - lo.context) / (above->context - lo.context);
  return low + t * (high - low);
}

}  // namespace

CostTable CostTable::load(const fs::path& file) {
  const std::string name = "cost table " + file.string();
  std::ifstream in(file, std::ios::binary);
  if (!in) throw input_error(name + " cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  specdec::tools::check_utf8_text<input_error>(text.str(), name, true);
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw input_error(name + ": malformed JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw input_error(name + ": expected a JSON object");
  const auto positive = [&](const nlohmann::ordered_json& v, const std::string& what) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      throw input_error(name + ": " + what + " must be a positive number of microseconds, got " + v.dump());
    return v.get<double>();
  };
  CostTable t;
  if (!j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty())
    throw input_error(name + ": \"nodes\" (the measured tree sizes) is missing or empty");
  for (const auto& n : j["nodes"]) {
    if (!n.is_number_integer() || n.get<long long>() < 1 || n.get<long long>() > (1 << 20) ||
        (!t.nodes.empty() && n.get<int>() <= t.nodes.back()))
      throw input_error(name + ": \"nodes\" must be increasing whole numbers >= 1, got " + j["nodes"].dump());
    t.nodes.push_back(n.get<int>());
  }
  if (t.nodes.front() != 1) throw input_error(name + ": \"nodes\" must start at 1 (the plain forward), got " + j["nodes"].dump());
  if (!j.contains("contexts") || !j["contexts"].is_array() || j["contexts"].empty())
    throw input_error(name + ": \"contexts\" is missing or empty");
  for (std::size_t c = 0; c < j["contexts"].size(); ++c) {
    const auto& row = j["contexts"][c];
    const std::string at = fmt::format("contexts[{}]", c);
    if (!row.is_object() || !row.contains("context") || !row["context"].is_number_integer() ||
        row["context"].get<long long>() < 0 || row["context"].get<long long>() > (1 << 24) ||
        (!t.contexts.empty() && row["context"].get<int>() <= t.contexts.back().context))
      throw input_error(name + ": " + at + ".context must be a whole number >= 0, larger than the previous context's");
    Context ctx;
    ctx.context = row["context"].get<int>();
    if (!row.contains("plain_us")) throw input_error(name + ": " + at + ".plain_us is missing");
    ctx.plain_us = positive(row["plain_us"], at + ".plain_us");
    if (!row.contains("forward_us") || !row["forward_us"].is_array() || row["forward_us"].size() != t.nodes.size())
      throw input_error(fmt::format("{}: {}.forward_us must hold one time per entry of \"nodes\" ({})", name, at,
                                    t.nodes.size()));
    for (std::size_t i = 0; i < t.nodes.size(); ++i)
      ctx.forward_us.push_back(positive(row["forward_us"][i], fmt::format("{}.forward_us[{}]", at, i)));
    t.contexts.push_back(std::move(ctx));
  }
  for (const auto& [key, value] : j.items())
    if (key != "nodes" && key != "contexts") t.metadata[key] = value;
  return t;
}

nlohmann::ordered_json CostTable::to_json() const {
  nlohmann::ordered_json j = metadata;
  j["nodes"] = nodes;
  j["contexts"] = nlohmann::ordered_json::array();
  for (const Context& c : contexts)
    j["contexts"].push_back({{"context", c.context}, {"plain_us", c.plain_us}, {"forward_us", c.forward_us}});
  return j;
}

double CostTable::forward_seconds(int n, int context) const {
  if (n > max_nodes())
    throw input_error(fmt::format("a step of {} tree nodes is larger than the cost table's largest measured forward "
                                  "({} nodes): lower --budget or measure larger trees",
                                  n, max_nodes()));
  return 1e-6 * across_contexts(contexts, context, [&](const Context& c) { return interpolate(nodes, c.forward_us, n); });
}

BatchCostModel::BatchCostModel(CostTable table) : table_(std::move(table)) {
  slope_from_ = table_.nodes.front();
  for (const int n : table_.nodes)
    if (2 * n <= table_.max_nodes()) slope_from_ = n;
}

double BatchCostModel::step_seconds(int nodes, int context) const {
  const int most = table_.max_nodes();
  if (nodes <= most || table_.nodes.size() < 2) return table_.forward_seconds(std::min(nodes, most), context);
  const double at_most = table_.forward_seconds(most, context), at_from = table_.forward_seconds(slope_from_, context);
  const double per_node = std::max(0.0, (at_most - at_from) / (most - slope_from_));
  return at_most + per_node * (nodes - most);
}

double CostTable::plain_seconds(int context) const {
  return 1e-6 * across_contexts(contexts, context, [](const Context& c) { return c.plain_us; });
}

std::string CostTable::describe() const {
  const auto text = [&](const char* key) {
    return metadata.contains(key) && metadata[key].is_string() ? metadata[key].get<std::string>() : std::string("?");
  };
  std::string out = "model " + (metadata.contains("model") && metadata["model"].contains("file")
                                    ? metadata["model"]["file"].get<std::string>()
                                    : std::string("?"));
  if (metadata.contains("model") && metadata["model"].value("synthetic_weights", false)) out += " (synthetic weights)";
  if (metadata.contains("threads")) out += fmt::format(", {} thread(s)", metadata["threads"].dump());
  return out + ", " + text("machine") + ", " + text("date");
}

}  // namespace specbench
