#include "batch.hpp"

#include <cmath>
#include <functional>
#include <optional>
#include <ostream>
#include <utility>

#include <fmt/format.h>

#include "common/values.hpp"
#include "cost_table.hpp"
#include "input_error.hpp"
#include "report.hpp"

namespace specbench {

ModelBatchTarget make_model_batch_target(std::shared_ptr<const specdec::Llama2cModel> model, int slots, int threads) {
  return ModelBatchTarget(std::move(model), slots, {threads});
}

const char* const model_batch_target_description =
    "Llama2cBatchTarget: one forward per step for all requests, each weight read once for all their nodes";

ReplayBatchTarget::ReplayBatchTarget(int slots, int vocab_size, token_t stop_token, std::unique_ptr<TimedBatch> timed)
    : targets_(std::vector<specdec::ReplayTarget>(static_cast<std::size_t>(slots),
                                                  specdec::ReplayTarget({stop_token}, vocab_size, stop_token))),
      timed_(std::move(timed)),
      stop_(stop_token) {}

namespace {

/// TimedBatch on the host.
class HostTimedBatch final : public TimedBatch {
 public:
  HostTimedBatch(std::shared_ptr<const specdec::Llama2cModel> model, int slots, int threads)
      : target_(std::move(model), slots, specdec::Llama2cBatchTarget::Options{threads}) {}
  void prefill(int slot, std::span<const token_t> tokens) override { target_.prefill(slot, tokens); }
  void forward(const specdec::TreeBatchView& batch) override { target_.forward(batch); }
  void commit(int slot, std::span<const specdec::node_t> path) override { target_.commit(slot, path); }
  void release(int slot) override { target_.release(slot); }

 private:
  specdec::Llama2cBatchTarget target_;
};

}  // namespace

TimedBatchMaker host_timed_batch(std::shared_ptr<const specdec::Llama2cModel> model, int threads) {
  return [model = std::move(model), threads](int slots) -> std::unique_ptr<TimedBatch> {
    return std::make_unique<HostTimedBatch>(model, slots, threads);
  };
}

std::vector<int> parse_batch_sizes(std::string_view text) {
  const auto bad = [&] {
    return input_error(fmt::format("expected batch sizes: whole numbers in [1, {}], comma-separated, got '{}'",
                                   max_batch_size, text));
  };
  std::vector<int> sizes;
  for (const std::string& item : specdec::tools::list_items(text)) {
    const std::optional<long long> value = specdec::tools::whole_number(item);
    if (!value || *value < 1 || *value > max_batch_size) throw bad();
    if (std::find(sizes.begin(), sizes.end(), *value) != sizes.end())
      throw input_error(fmt::format("batch size {} is listed twice in '{}'", *value, text));
    sizes.push_back(static_cast<int>(*value));
  }
  if (sizes.empty()) throw bad();
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

int batch_calibration_size(const std::vector<int>& sizes, int cap, int seq_len, int most) {
  const long step = static_cast<long>(sizes.back()) * tree_nodes(cap);
  const long largest = std::max<long>(tree_nodes(cap), std::min<long>(step, seq_len / 2));
  return static_cast<int>(std::min<long>(largest, most));
}

bool BatchReport::lossless() const {
  return std::all_of(run.rows.begin(), run.rows.end(),
                     [&](const BatchRow& r) { return !r.refused.empty() || r.equal_to_plain == run.requests; });
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& d : names) out += (out.empty() ? "" : ",") + d;
  return out;
}

double mean(double sum, int count) { return count > 0 ? sum / count : 0.0; }
double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

/// A pass of the first round; its tokens/s, the median over the rounds.
nlohmann::ordered_json pass_json(const BatchPass& p, double tokens_per_second, int requests) {
  return {{"tokens", p.tokens},
          {"forwards", p.forwards},
          {"seconds", p.seconds},
          {"prefill_seconds", p.prefill_seconds},
          {"tokens_per_second", tokens_per_second},
          {"mean_latency_seconds", mean(p.latency_seconds, requests)},
          {"mean_latency_forwards", mean(static_cast<double>(p.latency_forwards), requests)},
          {"tau", p.tau()},
          {"draft_nodes_per_forward", ratio(static_cast<double>(p.drafted_nodes), static_cast<double>(p.forwards))}};
}

}  // namespace

void print_batch_report(std::ostream& out, const BatchReport& r) {
  out << fmt::format("specbench {} --batch: drafters {} ({}), {} requests, exact verifier\n{}{}\n", r.command,
                     joined(r.run.drafters),
                     r.auto_budget.empty() ? fmt::format("budget {}", r.budget) : fmt::format("budget auto, cap {}", r.budget),
                     r.run.requests,
                     budget_line(r.budget, r.auto_budget, r.fixed_by_default, "draft nodes per request per step"),
                     r.auto_budget.empty() ? "" : "; each step's nodes shared out jointly by all requests");
  out << fmt::format("{}\ntarget: {}\n", r.source, r.target);
  out << "  B: requests decoded at once (a new one joins as one finishes); tok/s: new tokens of all requests / wall "
         "time of the pass\n  without the prefills (add(): the same in both passes), the median over the rounds; "
         "plain: roots only;\n  speedup: speculative / plain tok/s per round, median [min-max]; A/A: plain / the "
         "previous round's plain tok/s,\n  the noise floor; rounds: plain and speculative passes alternated; lat s: mean "
         "seconds from a request's add() to its finish\n  (first round); fwd: batched target forwards; fwd ratio: plain "
         "/ speculative forwards\n\n";
  out << fmt::format("{:>5} {:>12} {:>12} {:>19} {:>19} {:>6} {:>11} {:>11} {:>7} {:>10} {:>10} {:>9}\n", "B",
                     "plain tok/s", "spec tok/s", "speedup [min-max]", "A/A [min-max]", "rounds", "plain lat s",
                     "spec lat s", "tau", "plain fwd", "spec fwd", "fwd ratio");
  for (const BatchRow& row : r.run.rows) {
    if (!row.refused.empty()) {
      out << fmt::format("{:>5} not run: {}\n", row.batch, row.refused);
      continue;
    }
    out << fmt::format("{:>5} {:>12.0f} {:>12.0f} {:>19} {:>19} {:>6} {:>11.4g} {:>11.4g} {:>7.3f} {:>10} {:>10} {:>9.3f}\n",
                       row.batch, row.rounds.plain_rate(), row.rounds.speculative_rate(),
                       spread_text(row.rounds.speedup()), spread_text(row.rounds.noise_floor()), row.rounds.count(),
                       mean(row.plain.latency_seconds, r.run.requests), mean(row.speculative.latency_seconds, r.run.requests),
                       row.speculative.tau(), row.plain.forwards, row.speculative.forwards,
                       ratio(static_cast<double>(row.plain.forwards), static_cast<double>(row.speculative.forwards)));
  }
  if (r.lossless()) {
    const bool all_ran = std::all_of(r.run.rows.begin(), r.run.rows.end(), [](const BatchRow& row) { return row.refused.empty(); });
    out << fmt::format("lossless: every request's speculative output equals its plain output ({} requests, at every B{})\n",
                       r.run.requests, all_ran ? "" : " that ran");
  } else {
    for (const BatchRow& row : r.run.rows)
      if (row.refused.empty() && row.equal_to_plain != r.run.requests)
        out << fmt::format("NOT LOSSLESS: B = {}: the speculative output equals the plain output for {} of {} requests\n",
                           row.batch, row.equal_to_plain, r.run.requests);
  }
}

nlohmann::ordered_json to_json(const BatchReport& r) {
  nlohmann::ordered_json j;
  j["drafters"] = r.run.drafters;
  j["budget"] = r.budget;
  j["budget_kind"] = budget_kind(r.auto_budget, r.fixed_by_default);
  if (!r.auto_budget.empty()) j["automatic_budget"] = {{"cap", r.budget}, {"cost_model", r.auto_budget}};
  j["requests"] = r.run.requests;
  j["source"] = r.source;
  j["target"] = r.target;
  j["rows"] = nlohmann::ordered_json::array();
  for (const BatchRow& row : r.run.rows) {
    if (!row.refused.empty()) {
      j["rows"].push_back({{"batch", row.batch}, {"refused", row.refused}});
      continue;
    }
    j["rows"].push_back({{"batch", row.batch},
                         {"plain", pass_json(row.plain, row.rounds.plain_rate(), r.run.requests)},
                         {"speculative", pass_json(row.speculative, row.rounds.speculative_rate(), r.run.requests)},
                         {"ratio", row.rounds.speedup().median},
                         {"rounds", to_json(row.rounds)},
                         {"forward_ratio", ratio(static_cast<double>(row.plain.forwards),
                                                 static_cast<double>(row.speculative.forwards))},
                         {"equal_to_plain", row.equal_to_plain}});
  }
  j["lossless"] = r.lossless();
  return j;
}

std::string batch_svg(const BatchReport& r) {
  constexpr double width = 760, height = 480, left = 80, right = 170, top = 60, bottom = 60;
  constexpr const char* plain_color = "#4e79a7";
  constexpr const char* speculative_color = "#f28e2b";
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  // The B that ran; those that did not are named under the axis.
  std::vector<std::reference_wrapper<const BatchRow>> rows;
  std::string not_run;
  for (const BatchRow& row : r.run.rows) {
    if (row.refused.empty()) rows.emplace_back(row);
    else not_run += fmt::format("{}{}", not_run.empty() ? "" : ", ", row.batch);
  }
  const double lx0 = rows.empty() ? 0.0 : std::log2(rows.front().get().batch);
  const double lx1 = rows.empty() ? 0.0 : std::log2(rows.back().get().batch);
  double y_top = 0;
  for (const BatchRow& row : rows)
    y_top = std::max({y_top, row.rounds.plain_rate(), row.rounds.speculative_rate()});
  // A round step of 1, 2 or 5 times a power of ten, about five ticks.
  const double raw = std::max(y_top, 1.0) / 5.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = magnitude * (raw <= magnitude ? 1 : raw <= 2 * magnitude ? 2 : raw <= 5 * magnitude ? 5 : 10);
  const double y_max = step * std::ceil(std::max(y_top, 1.0) / step);
  const auto x_of = [&](double b) {
    return left + (lx1 > lx0 ? plot_w * (std::log2(b) - lx0) / (lx1 - lx0) : plot_w / 2);
  };
  const auto y_of = [&](double v) { return top + plot_h * (1.0 - v / y_max); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  svg += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">Throughput against batch size: "
                     "{} ({})</text>\n",
                     left + plot_w / 2, xml_escape(joined(r.run.drafters)),
                     r.auto_budget.empty() ? fmt::format("budget {}", r.budget) : fmt::format("budget auto, cap {}", r.budget));
  svg += fmt::format("<text x=\"{}\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n", left + plot_w / 2,
                     xml_escape(fmt::format("specbench {}, {} requests; {}", r.command, r.run.requests, r.source)));
  for (double v = 0; v <= y_max * (1 + 1e-9); v += step) {
    svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left, left + plot_w,
                       y_of(v), y_of(v));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 6, y_of(v) + 4, v);
  }
  for (const BatchRow& row : rows) {
    svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/>\n", x_of(row.batch),
                       top, top + plot_h);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(row.batch),
                       top + plot_h + 16, row.batch);
  }
  // pass_of(row): the arm's first pass and its median tokens/s over the rounds.
  const auto series = [&](const char* name, const char* color, auto pass_of, double legend_y) {
    std::string points;
    for (const BatchRow& row : rows)
      points += fmt::format("{:.1f},{:.1f} ", x_of(row.batch), y_of(pass_of(row).second));
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", points, color);
    for (const BatchRow& row : rows) {
      const auto [p, rate] = pass_of(row);
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{}, B = {}: {:.0f} tokens/s, "
                         "mean latency {:.4f} s, tau {:.3f}</title></circle>\n",
                         x_of(row.batch), y_of(rate), color, name, row.batch, rate,
                         mean(p->latency_seconds, r.run.requests), p->tau());
    }
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"/>\n",
                       left + plot_w + 15, left + plot_w + 35, legend_y, color);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + plot_w + 40, legend_y + 4, name);
  };
  series("plain", plain_color, [](const BatchRow& row) { return std::pair(&row.plain, row.rounds.plain_rate()); },
         top + 10);
  series("speculative", speculative_color,
         [](const BatchRow& row) { return std::pair(&row.speculative, row.rounds.speculative_rate()); }, top + 30);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"black\"/>\n", left, left + plot_w,
                     top + plot_h);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, top + plot_h);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">B: requests decoded at once (log scale){}</text>\n",
                     left + plot_w / 2, height - 18,
                     not_run.empty() ? "" : "; not run (the device cannot hold them): B = " + not_run);
  svg += fmt::format("<text transform=\"translate(20 {}) rotate(-90)\" text-anchor=\"middle\">generated tokens/s, all "
                     "requests</text>\n",
                     top + plot_h / 2);
  svg += "</svg>\n";
  return svg;
}

}  // namespace specbench
