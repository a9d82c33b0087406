#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

namespace specbench {

// ---- Summary ---------------------------------------------------------------------------------

void Summary::add(const TurnResult& turn) {
  const specdec::DecodeStats& s = turn.stats;
  ++turns;
  steps += s.steps;
  tokens += turn.tokens;
  draft_nodes += s.drafted_nodes;
  draft_seconds += s.draft_seconds;
  cost_seconds += turn.cost_seconds;
  plain_cost_seconds += turn.plain_cost_seconds;
  accepted_by_drafter.resize(std::max(accepted_by_drafter.size(), s.accepted_by_drafter.size()));
  for (std::size_t d = 0; d < s.accepted_by_drafter.size(); ++d) {
    auto& into = accepted_by_drafter[d];
    const auto& from = s.accepted_by_drafter[d];
    into.resize(std::max(into.size(), from.size()), 0);
    for (std::size_t k = 0; k < from.size(); ++k) into[k] += from[k];
  }
  nodes_per_step.resize(std::max(nodes_per_step.size(), s.nodes_per_step.size()), 0);
  for (std::size_t k = 0; k < s.nodes_per_step.size(); ++k) nodes_per_step[k] += s.nodes_per_step[k];
  sized_steps += s.sized_steps;
  paused_steps += s.paused_steps;
  expected_tokens += s.expected_tokens;
  expected_seconds += s.expected_seconds;
}

double Summary::tau() const { return steps ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0; }
double Summary::draft_nodes_per_step() const {
  return steps ? static_cast<double>(draft_nodes) / static_cast<double>(steps) : 0.0;
}
double Summary::draft_us_per_step() const { return steps ? draft_seconds * 1e6 / static_cast<double>(steps) : 0.0; }
double Summary::tokens_per_second() const {
  const double seconds = cost_seconds + draft_seconds;
  return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
}
double Summary::plain_tokens_per_second() const {
  return plain_cost_seconds > 0 ? static_cast<double>(tokens) / plain_cost_seconds : 0.0;
}
double Summary::speedup() const {
  const double seconds = cost_seconds + draft_seconds;
  return seconds > 0 ? plain_cost_seconds / seconds : 0.0;
}

double Summary::expected_tokens_per_second() const {
  return expected_seconds > 0 ? expected_tokens / expected_seconds : 0.0;
}

double mean_nodes(const std::vector<std::int64_t>& nodes_per_step) {
  double steps = 0, nodes = 0;
  for (std::size_t k = 0; k < nodes_per_step.size(); ++k) {
    steps += static_cast<double>(nodes_per_step[k]);
    nodes += static_cast<double>(k) * static_cast<double>(nodes_per_step[k]);
  }
  return steps > 0 ? nodes / steps : 0.0;
}

int quantile_nodes(const std::vector<std::int64_t>& nodes_per_step, double q) {
  std::int64_t steps = 0;
  for (const auto c : nodes_per_step) steps += c;
  // The smallest k with at least q of the steps at k nodes or fewer.
  const double want = q * static_cast<double>(steps);
  std::int64_t seen = 0;
  for (std::size_t k = 0; k < nodes_per_step.size(); ++k) {
    seen += nodes_per_step[k];
    if (seen > 0 && static_cast<double>(seen) >= want) return static_cast<int>(k);
  }
  return 0;
}

std::string budget_text(const Report& report) {
  return report.auto_budget.empty() ? fmt::format("budget {}", report.budget)
                                    : fmt::format("budget auto (cap {})", report.budget);
}

std::string budget_line(int budget, const std::string& auto_budget, bool fixed_by_default, const char* unit) {
  if (!auto_budget.empty())
    return fmt::format("budget: auto, at most {} {}, sized by the cost model of {}", budget, unit, auto_budget);
  if (fixed_by_default)
    return fmt::format("budget: fixed, {} {} (the default where no cost model is at hand: --cost TABLE or "
                       "--timed-model M gives one, and --budget auto with it)",
                       budget, unit);
  return fmt::format("budget: fixed, {} {} (--budget {})", budget, unit, budget);
}

std::string budget_kind(const std::string& auto_budget, bool fixed_by_default) {
  return !auto_budget.empty() ? "auto" : fixed_by_default ? "fixed_by_default" : "fixed";
}

std::string Report::combination() const {
  std::string out;
  for (const auto& d : drafters) out += (out.empty() ? "" : ",") + d;
  return out;
}

Report summarise(std::span<const std::string> turn_categories, std::span<const TurnResult> turns,
                 std::vector<std::string> drafters, int budget, double seconds) {
  Report report;
  report.budget = budget;
  report.seconds = seconds;
  report.overall.accepted_by_drafter.resize(drafters.size());
  report.drafters = std::move(drafters);
  for (const std::string& c : turn_categories) {
    const bool known = std::any_of(report.categories.begin(), report.categories.end(),
                                   [&](const auto& entry) { return entry.first == c; });
    if (!known) report.categories.emplace_back(c, report.overall);
  }
  for (std::size_t t = 0; t < turns.size(); ++t) {
    report.overall.add(turns[t]);
    for (auto& [name, summary] : report.categories)
      if (name == turn_categories[t]) summary.add(turns[t]);
  }
  return report;
}

Report summarise(const Corpus& corpus, const ReplayRun& run, const ReplayOptions& options) {
  std::vector<std::string> categories;
  for (const Turn& turn : corpus.turns) categories.push_back(turn.category);
  Report report = summarise(categories, run.turns, run.drafters, options.budget, run.seconds);
  report.calibration = run.calibration;
  return report;
}

ReplayRun replay_in_rounds(ReplayRunner runner, const Corpus& corpus, const ReplayOptions& options,
                           const RoundRule& rule, Rounds& rounds) {
  ReplayRun first;
  do {
    ReplayRun run = runner(corpus, options);
    std::int64_t tokens = 0;
    double speculative = 0, plain = 0;
    for (const TurnResult& t : run.turns) {
      tokens += t.tokens;
      speculative += t.cost_seconds + t.stats.draft_seconds;
      plain += t.plain_cost_seconds;
    }
    const auto rate = [tokens](double seconds) { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0; };
    rounds.add({rate(plain), plain, rate(speculative), speculative});
    if (rounds.count() == 1) {
      first = std::move(run);
    } else {
      for (std::size_t t = 0; t < first.turns.size(); ++t) {  // sums, made means below
        first.turns[t].cost_seconds += run.turns[t].cost_seconds;
        first.turns[t].plain_cost_seconds += run.turns[t].plain_cost_seconds;
        first.turns[t].stats.draft_seconds += run.turns[t].stats.draft_seconds;
      }
      first.seconds += run.seconds;
    }
  } while (rule.more(rounds.count(), rounds.plain_seconds(), rounds.speculative_seconds()));
  const double n = rounds.count();
  for (TurnResult& t : first.turns) {
    t.cost_seconds /= n;
    t.plain_cost_seconds /= n;
    t.stats.draft_seconds /= n;
  }
  return first;
}

// ---- text ------------------------------------------------------------------------------------

namespace {

std::string summary_row(const std::string& name, const Summary& s, bool costed) {
  std::string row = fmt::format("{:<16} {:>6} {:>9} {:>9} {:>7.3f} {:>11.2f} {:>14.2f}", name, s.turns, s.steps,
                                s.tokens, s.tau(), s.draft_nodes_per_step(), s.draft_us_per_step());
  if (costed)
    row += fmt::format(" {:>10.1f} {:>12.1f} {:>8.3f}", s.tokens_per_second(), s.plain_tokens_per_second(), s.speedup());
  return row + "\n";
}

std::int64_t total(const std::vector<std::int64_t>& histogram) {
  std::int64_t sum = 0;
  for (auto c : histogram) sum += c;
  return sum;
}

}  // namespace

void print_report(std::ostream& out, const Report& report) {
  const Summary& all = report.overall;
  out << fmt::format("specbench replay: drafters {} ({}), {} turns replayed in {:.2f} s\n{}\n",
                     report.combination().empty() ? "none" : report.combination(), budget_text(report), all.turns,
                     report.seconds, budget_line(report.budget, report.auto_budget, report.fixed_by_default));
  print_tables(out, report);
  if (report.rounds.count() > 0)
    out << fmt::format("\nover {}: {}\n  (speculative / plain tokens/s per round; A/A: plain / the previous round's "
                       "plain, the noise floor)\n",
                       rounds_text(report.rounds), ratios_text(report.rounds));
  print_auto_budget(out, report, report.cost_source.empty() ? 0.0 : all.tokens_per_second());
}

void print_auto_budget(std::ostream& out, const Report& report, double measured_tokens_per_second) {
  if (report.auto_budget.empty()) return;
  const Summary& s = report.overall;
  const auto& h = s.nodes_per_step;
  out << "\nautomatic budget (cap " << report.budget << "), cost model: " << report.auto_budget << "\n";
  out << fmt::format("  draft nodes chosen per step: mean {:.2f}; p10 {}, p50 {}, p90 {}, max {}\n", mean_nodes(h),
                     quantile_nodes(h, 0.1), quantile_nodes(h, 0.5), quantile_nodes(h, 0.9), quantile_nodes(h, 1.0));
  out << fmt::format("  drafters paused (not asked) on {} of {} steps\n", s.paused_steps, s.steps);
  out << fmt::format("  calibration error of the acceptance estimates: {:.4f} (over {:.0f} verdicts)\n",
                     report.calibration.error, report.calibration.verdicts);
  const double expected_tau = s.sized_steps ? s.expected_tokens / static_cast<double>(s.sized_steps) : 0.0;
  out << fmt::format("  expected: tau {:.3f}, {:.1f} tokens/s; measured: tau {:.3f}", expected_tau,
                     s.expected_tokens_per_second(), s.tau());
  if (measured_tokens_per_second > 0)
    out << fmt::format(", {:.1f} tokens/s (measured / expected {:.3f})", measured_tokens_per_second,
                       s.expected_tokens_per_second() > 0 ? measured_tokens_per_second / s.expected_tokens_per_second() : 0.0);
  out << "\n";
}

void print_tables(std::ostream& out, const Report& report) {
  const Summary& all = report.overall;
  const bool costed = !report.cost_source.empty();
  out << "tau = tokens per target call, bonus token included (Spec-Bench's convention)\n";
  if (costed)
    out << "time: " << report.cost_source
        << "\n  tok/s = tokens / (forwards + commits + drafting); plain tok/s = the same tokens decoded one forward "
           "each; speedup = their ratio"
        << (report.rounds.count() > 1 ? fmt::format("; times: the mean of {} rounds", report.rounds.count()) : "")
        << "\n";
  out << fmt::format("\n{:<16} {:>6} {:>9} {:>9} {:>7} {:>11} {:>14}", "category", "turns", "steps", "tokens", "tau",
                     "nodes/step", "draft us/step");
  out << (costed ? fmt::format(" {:>10} {:>12} {:>8}\n", "tok/s", "plain tok/s", "speedup") : "\n");
  for (const auto& [name, summary] : report.categories) out << summary_row(name, summary, costed);
  out << summary_row("overall", all, costed);

  if (report.drafters.empty()) return;
  out << "\naccepted length per drafter: steps whose accepted path starts with exactly k draft tokens\n"
         "proposed by that drafter (share of all steps)\n";
  std::size_t rows = 0;
  for (const auto& h : all.accepted_by_drafter) rows = std::max(rows, h.size());
  out << fmt::format("{:>4}", "k");
  for (const auto& d : report.drafters) out << fmt::format(" {:>18}", d);
  out << '\n';
  for (std::size_t k = 0; k < rows; ++k) {
    out << fmt::format("{:>4}", k);
    for (const auto& h : all.accepted_by_drafter) {
      const std::int64_t count = k < h.size() ? h[k] : 0;
      const std::int64_t steps = total(h);
      out << fmt::format(" {:>10} {:>6.2f}%", count, steps ? 100.0 * static_cast<double>(count) / static_cast<double>(steps) : 0.0);
    }
    out << '\n';
  }
}

void print_comparison(std::ostream& out, std::span<const Report> reports) {
  if (reports.empty()) return;
  std::size_t name_width = 11;
  for (const auto& r : reports) name_width = std::max(name_width, r.combination().size());
  out << fmt::format("specbench compare: {}, {} turns; tau = tokens per target call, bonus token included\n{}\n\n",
                     budget_text(reports[0]), reports[0].overall.turns,
                     budget_line(reports[0].budget, reports[0].auto_budget, reports[0].fixed_by_default));
  out << fmt::format("{:<{}} {:>7} {:>11} {:>14}", "combination", name_width, "tau", "nodes/step", "draft us/step");
  for (const auto& [category, summary] : reports[0].categories)
    out << fmt::format(" {:>{}}", category, std::max<std::size_t>(category.size(), 6));
  const bool costed = !reports[0].cost_source.empty();
  out << fmt::format(" {:>8}{}\n", "seconds", costed ? fmt::format(" {:>10} {:>8}", "tok/s", "speedup") : "");
  for (const auto& r : reports) {
    out << fmt::format("{:<{}} {:>7.3f} {:>11.2f} {:>14.2f}", r.combination(), name_width, r.overall.tau(),
                       r.overall.draft_nodes_per_step(), r.overall.draft_us_per_step());
    for (const auto& [category, summary] : r.categories)
      out << fmt::format(" {:>{}.3f}", summary.tau(), std::max<std::size_t>(category.size(), 6));
    out << fmt::format(" {:>8.2f}", r.seconds);
    if (costed) out << fmt::format(" {:>10.1f} {:>8.3f}", r.overall.tokens_per_second(), r.overall.speedup());
    out << "\n";
  }
  if (!reports[0].auto_budget.empty()) {
    out << "\nautomatic budget (cap " << reports[0].budget << "), cost model: " << reports[0].auto_budget << "\n";
    out << fmt::format("{:<{}} {:>10} {:>4} {:>4} {:>4} {:>11} {:>12} {:>10}\n", "combination", name_width,
                       "nodes mean", "p10", "p50", "p90", "calib. err", "expected t/s", "tok/s");
    for (const auto& r : reports) {
      const auto& h = r.overall.nodes_per_step;
      out << fmt::format("{:<{}} {:>10.2f} {:>4} {:>4} {:>4} {:>11.4f} {:>12.1f} {:>10.1f}\n", r.combination(),
                         name_width, mean_nodes(h), quantile_nodes(h, 0.1), quantile_nodes(h, 0.5),
                         quantile_nodes(h, 0.9), r.calibration.error, r.overall.expected_tokens_per_second(),
                         costed ? r.overall.tokens_per_second() : 0.0);
    }
  }
  if (!costed) return;
  out << "\nspeedup over plain decoding (time: " << reports[0].cost_source << ")\n";
  out << fmt::format("{:<{}} {:>8}", "combination", name_width, "overall");
  for (const auto& [category, summary] : reports[0].categories)
    out << fmt::format(" {:>{}}", category, std::max<std::size_t>(category.size(), 6));
  out << "\n";
  for (const auto& r : reports) {
    out << fmt::format("{:<{}} {:>8.3f}", r.combination(), name_width, r.overall.speedup());
    for (const auto& [category, summary] : r.categories)
      out << fmt::format(" {:>{}.3f}", summary.speedup(), std::max<std::size_t>(category.size(), 6));
    out << "\n";
  }
}

void print_modelled(std::ostream& out, const ModelledRun& run) {
  std::size_t name_width = 11;
  for (const auto& r : run.reports) name_width = std::max(name_width, r.combination().size());
  out << "\nmodelled, not measured in this run: the speed of this run's steps where " << run.source
      << " was measured\n";
  out << fmt::format("{:<{}} {:>7} {:>10} {:>8}\n", "combination", name_width, "tau", "tok/s", "speedup");
  for (const auto& r : run.reports)
    out << fmt::format("{:<{}} {:>7.3f} {:>10.1f} {:>8.3f}\n", r.combination(), name_width, r.overall.tau(),
                       r.overall.tokens_per_second(), r.overall.speedup());
}

// ---- JSON ------------------------------------------------------------------------------------

namespace {

nlohmann::ordered_json summary_json(const Summary& s, bool costed) {
  nlohmann::ordered_json j{{"tau", s.tau()},
                           {"steps", s.steps},
                           {"tokens", s.tokens},
                           {"draft_nodes_per_step", s.draft_nodes_per_step()},
                           {"draft_us_per_step", s.draft_us_per_step()},
                           {"turns", s.turns}};
  if (costed)
    j["time"] = {{"target_seconds", s.cost_seconds},
                 {"draft_seconds", s.draft_seconds},
                 {"plain_seconds", s.plain_cost_seconds},
                 {"tokens_per_second", s.tokens_per_second()},
                 {"plain_tokens_per_second", s.plain_tokens_per_second()},
                 {"speedup", s.speedup()}};
  return j;
}

}  // namespace

nlohmann::ordered_json to_json(const Report& report) {
  nlohmann::ordered_json j;
  j["drafters"] = report.drafters;
  j["budget"] = report.budget;
  j["budget_kind"] = budget_kind(report.auto_budget, report.fixed_by_default);
  const bool costed = !report.cost_source.empty();
  if (costed) j["time_source"] = report.cost_source;
  j["overall"] = summary_json(report.overall, costed);
  j["categories"] = nlohmann::ordered_json::object();
  for (const auto& [name, summary] : report.categories) j["categories"][name] = summary_json(summary, costed);
  j["accepted_length_histogram"] = nlohmann::ordered_json::object();
  for (std::size_t d = 0; d < report.drafters.size(); ++d)
    j["accepted_length_histogram"][report.drafters[d]] = report.overall.accepted_by_drafter[d];
  j["seconds"] = report.seconds;
  if (report.rounds.count() > 0) j["rounds"] = to_json(report.rounds);
  if (!report.auto_budget.empty()) j["automatic_budget"] = auto_budget_json(report, costed ? report.overall.tokens_per_second() : 0.0);
  return j;
}

nlohmann::ordered_json auto_budget_json(const Report& report, double measured_tokens_per_second) {
  const Summary& s = report.overall;
  const auto& h = s.nodes_per_step;
  nlohmann::ordered_json j{{"cap", report.budget},
                           {"cost_model", report.auto_budget},
                           {"nodes_per_step_mean", mean_nodes(h)},
                           {"nodes_per_step_percentiles",
                            {{"p10", quantile_nodes(h, 0.1)},
                             {"p50", quantile_nodes(h, 0.5)},
                             {"p90", quantile_nodes(h, 0.9)},
                             {"max", quantile_nodes(h, 1.0)}}},
                           {"nodes_per_step_histogram", h},
                           {"calibration_error", report.calibration.error},
                           {"verdicts", report.calibration.verdicts},
                           {"sized_steps", s.sized_steps},
                           {"paused_steps", s.paused_steps},
                           {"expected_tokens", s.expected_tokens},
                           {"expected_seconds", s.expected_seconds},
                           {"expected_tokens_per_second", s.expected_tokens_per_second()}};
  if (measured_tokens_per_second > 0) j["measured_tokens_per_second"] = measured_tokens_per_second;
  return j;
}

// ---- model -------------------------------------------------------------------------------------

namespace {

std::string verifier_description(const ModelOptions& o) {
  switch (o.verifier) {
    case VerifierKind::exact: return "exact (greedy)";
    case VerifierKind::rejection:
      return fmt::format("rejection sampling (temperature {:g}, top-p {:g}, seed {})", o.sampling.temperature,
                         o.sampling.top_p, o.seed);
    case VerifierKind::conditional:
      return fmt::format("conditional (delta {:g}, top-k {}; LOSSY), next token at temperature {:g}, seed {}",
                         o.conditional.delta, o.conditional.top_k, o.sampling.temperature, o.seed);
  }
  return "?";
}

double ratio(std::int64_t a, std::int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }

}  // namespace

ModelReport summarise_model(const ModelBench& bench, const ModelRun& run, const ModelOptions& options) {
  ModelReport m;
  std::vector<std::string> tasks;
  std::vector<TurnResult> turns;
  for (std::size_t p = 0; p < run.turns.size(); ++p) {
    const ModelTurn& turn = run.turns[p];
    tasks.push_back(bench.prompts[p].task);
    turns.push_back(turn.result);
    m.speculative_tokens += turn.result.tokens;
    m.plain_tokens += turn.plain_tokens;
    m.equal_to_plain += turn.equals_plain;
    if (run.counts_draft_forwards) {
      m.draft_forwards = std::max<std::int64_t>(m.draft_forwards, 0) + turn.draft_forwards;
      m.draft_nodes += turn.draft_nodes;
    }
  }
  m.report = summarise(tasks, turns, run.drafters, options.budget, run.seconds);
  m.report.calibration = run.calibration;
  m.rounds = run.rounds;
  m.decode_rounds = run.decode_rounds;
  const specdec::LlamaConfig& c = bench.model->config();
  m.model = fmt::format("dim {}, {} layers, {} heads, vocab {}, {} positions", c.dim, c.n_layers, c.n_heads,
                        c.vocab_size, c.seq_len);
  m.verifier = verifier_description(options);
  m.dresd_search = options.resources.dense_search_used();
  m.prompts = static_cast<int>(run.turns.size());
  m.threads = options.threads;
  m.greedy = options.verifier == VerifierKind::exact;
  return m;
}

void print_model_report(std::ostream& out, const ModelReport& m) {
  const Report& r = m.report;
  out << fmt::format("specbench model: {}\nverifier {}, drafters {} ({}), {} prompts in {:.2f} s\n{}\n", m.model,
                     m.verifier, r.combination().empty() ? "none" : r.combination(), budget_text(r), m.prompts, r.seconds,
                     budget_line(r.budget, r.auto_budget, r.fixed_by_default));
  if (!m.dresd_search.empty()) out << fmt::format("dresd search: {}\n", m.dresd_search);
  if (m.clamped > 0)
    out << fmt::format("({} prompts had max-new-tokens cut to the model's positions)\n", m.clamped);
  print_tables(out, r);
  out << fmt::format("\nspeed (same prompts, {} forward thread{}; plain and speculative passes alternated, {}): "
                     "speculative {:.0f} tokens/s, plain {:.0f} tokens/s (medians)\n",
                     m.threads, m.threads == 1 ? "" : "s", rounds_text(m.rounds), m.rounds.speculative_rate(),
                     m.rounds.plain_rate());
  out << fmt::format("  {}\n  decoding alone (the prefills left out, as --batch does): {}\n  (speculative / plain "
                     "tokens/s per round; A/A: plain / the previous round's plain, the noise floor)\n",
                     ratios_text(m.rounds), ratios_text(m.decode_rounds));
  if (m.draft_forwards >= 0)
    out << fmt::format("draft model: {} forwards, {:.3f} per target step, {:.3f} per committed token; {:.2f} nodes per "
                       "forward\n",
                       m.draft_forwards, ratio(m.draft_forwards, r.overall.steps), ratio(m.draft_forwards, r.overall.tokens),
                       ratio(m.draft_nodes, m.draft_forwards));
  if (m.greedy)
    out << fmt::format("lossless: the output equals plain greedy decoding on {} of {} prompts{}\n", m.equal_to_plain,
                       m.prompts, m.equal_to_plain == m.prompts ? "" : "  <-- NOT LOSSLESS");
  print_auto_budget(out, r, m.rounds.speculative_rate());
}

nlohmann::ordered_json to_json(const ModelReport& m) {
  nlohmann::ordered_json j = to_json(m.report);
  j["model"] = m.model;
  j["verifier"] = m.verifier;
  if (!m.dresd_search.empty()) j["dresd_search"] = m.dresd_search;
  j["prompts"] = m.prompts;
  j["threads"] = m.threads;
  j["clamped_prompts"] = m.clamped;
  j["speculative"] = {{"tokens", m.speculative_tokens},
                      {"tokens_per_second", m.rounds.speculative_rate()},
                      {"decode_tokens_per_second", m.decode_rounds.speculative_rate()}};
  j["plain"] = {{"tokens", m.plain_tokens},
                {"tokens_per_second", m.rounds.plain_rate()},
                {"decode_tokens_per_second", m.decode_rounds.plain_rate()}};
  j["rounds"] = to_json(m.rounds);
  j["decode_rounds"] = to_json(m.decode_rounds);
  if (m.draft_forwards >= 0)
    j["draft_model"] = {{"forwards", m.draft_forwards},
                        {"per_target_step", ratio(m.draft_forwards, m.report.overall.steps)},
                        {"per_committed_token", ratio(m.draft_forwards, m.report.overall.tokens)},
                        {"nodes", m.draft_nodes}};
  if (m.greedy) j["equal_to_plain_greedy"] = m.equal_to_plain;
  if (!m.report.auto_budget.empty())
    j["automatic_budget"] = auto_budget_json(m.report, m.rounds.speculative_rate());
  return j;
}

// ---- SVG -------------------------------------------------------------------------------------

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string histogram_svg(const Report& report) {
  constexpr double width = 900, height = 440, left = 70, right = 20, top = 60, bottom = 60;
  constexpr const char* colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
  const auto& histograms = report.overall.accepted_by_drafter;
  const std::size_t drafters = histograms.size();
  std::size_t lengths = 1;
  double top_share = 0;
  for (const auto& h : histograms) {
    lengths = std::max(lengths, h.size());
    const double steps = static_cast<double>(std::max<std::int64_t>(total(h), 1));
    for (auto c : h) top_share = std::max(top_share, 100.0 * static_cast<double>(c) / steps);
  }
  const double y_max = std::max(10.0, std::ceil(top_share / 10.0) * 10.0);
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double group_w = plot_w / static_cast<double>(lengths);
  const double bar_w = group_w * 0.8 / static_cast<double>(std::max<std::size_t>(drafters, 1));
  auto y_of = [&](double share) { return top + plot_h * (1.0 - share / y_max); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  svg += fmt::format(
      "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">Accepted length per drafter: {} "
      "(budget {}, tau {:.3f}, {} steps)</text>\n",
      width / 2, xml_escape(report.combination()), report.budget, report.overall.tau(), report.overall.steps);
  for (int tick = 0; tick <= 5; ++tick) {
    const double share = y_max * tick / 5.0;
    svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left, left + plot_w,
                       y_of(share), y_of(share));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}%</text>\n", left - 6, y_of(share) + 4, share);
  }
  const std::size_t label_every = lengths > 20 ? (lengths + 19) / 20 : 1;
  for (std::size_t k = 0; k < lengths; ++k) {
    const double x0 = left + group_w * static_cast<double>(k) + group_w * 0.1;
    for (std::size_t d = 0; d < drafters; ++d) {
      const auto& h = histograms[d];
      const double steps = static_cast<double>(std::max<std::int64_t>(total(h), 1));
      const double share = k < h.size() ? 100.0 * static_cast<double>(h[k]) / steps : 0.0;
      svg += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>{}: k = {}, "
          "{:.2f}% of steps</title></rect>\n",
          x0 + bar_w * static_cast<double>(d), y_of(share), bar_w, top + plot_h - y_of(share), colors[d % 8],
          xml_escape(report.drafters[d]), k, share);
    }
    if (k % label_every == 0)
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                         left + group_w * (static_cast<double>(k) + 0.5), top + plot_h + 16, k);
  }
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"black\"/>\n", left, left + plot_w,
                     top + plot_h);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, top + plot_h);
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">accepted length k (draft tokens of the accepted path "
      "proposed by the drafter)</text>\n",
      left + plot_w / 2, height - 18);
  svg += fmt::format(
      "<text transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\">share of target calls</text>\n",
      top + plot_h / 2);
  double legend_x = left;  // one row under the title
  for (std::size_t d = 0; d < drafters; ++d) {
    svg += fmt::format("<rect x=\"{}\" y=\"36\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", legend_x, colors[d % 8]);
    svg += fmt::format("<text x=\"{}\" y=\"46\">{}</text>\n", legend_x + 17, xml_escape(report.drafters[d]));
    legend_x += 40 + 7.5 * static_cast<double>(report.drafters[d].size());
  }
  svg += "</svg>\n";
  return svg;
}

namespace {

/// One panel of grouped bars at vertical offset `y0`: values[series][group], with a dashed line at
/// `reference` (1: plain decoding).
std::string bar_panel(double y0, const std::string& title, const std::string& subtitle, const std::string& y_label,
                      const std::vector<std::string>& groups, const std::vector<std::string>& series,
                      const std::vector<std::vector<double>>& values, double reference) {
  constexpr double width = 1000, height = 360, left = 70, right = 20, top = 60, bottom = 70;
  constexpr const char* colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
  double top_value = reference;
  for (const auto& row : values)
    for (const double v : row) top_value = std::max(top_value, v);
  const double step = top_value > 4 ? 1.0 : 0.5;
  const double y_max = std::ceil(top_value * 1.05 / step) * step;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double group_w = plot_w / static_cast<double>(std::max<std::size_t>(groups.size(), 1));
  const double bar_w = group_w * 0.8 / static_cast<double>(std::max<std::size_t>(series.size(), 1));
  const auto y_of = [&](double v) { return y0 + top + plot_h * (1.0 - v / y_max); };
  std::string svg = fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
                                width / 2, y0 + 20, xml_escape(title));
  // The subtitle (what the time comes from) can be long: cut to what the width holds.
  const std::size_t fits = 165;
  const std::string sub = subtitle.size() > fits ? subtitle.substr(0, fits - 3) + "..." : subtitle;
  if (!sub.empty())
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\" fill=\"#555\">{}</text>\n",
                       width / 2, y0 + 33, xml_escape(sub));
  for (double v = 0; v <= y_max + 1e-9; v += step) {
    svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left,
                       left + plot_w, y_of(v), y_of(v));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 6, y_of(v) + 4, v);
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double x0 = left + group_w * static_cast<double>(g) + group_w * 0.1;
    for (std::size_t k = 0; k < series.size(); ++k) {
      const double v = values[k][g];
      svg += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>{}, {}: {:.3f}</title></rect>\n",
          x0 + bar_w * static_cast<double>(k), y_of(v), bar_w, y0 + top + plot_h - y_of(v), colors[k % 8],
          xml_escape(series[k]), xml_escape(groups[g]), v);
    }
    // Category names slanted, so that long ones do not overlap.
    const double cx = left + group_w * (static_cast<double>(g) + 0.5);
    svg += fmt::format("<text transform=\"translate({:.1f} {}) rotate(-30)\" text-anchor=\"end\"{}>{}</text>\n", cx,
                       y0 + top + plot_h + 14, groups[g] == "overall" ? " font-weight=\"bold\"" : "",
                       xml_escape(groups[g]));
  }
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#555\" stroke-dasharray=\"5 4\"/>\n",
                     left, left + plot_w, y_of(reference));
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"black\"/>\n", left, left + plot_w,
                     y0 + top + plot_h);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"black\"/>\n", left, y0 + top,
                     y0 + top + plot_h);
  svg += fmt::format("<text transform=\"translate(20 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                     y0 + top + plot_h / 2, xml_escape(y_label));
  double legend_x = left;
  for (std::size_t k = 0; k < series.size(); ++k) {
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", legend_x, y0 + 38,
                       colors[k % 8]);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", legend_x + 17, y0 + 48, xml_escape(series[k]));
    legend_x += 40 + 7.5 * static_cast<double>(series[k].size());
  }
  return svg;
}

}  // namespace

std::string comparison_svg(std::span<const Report> reports) {
  constexpr double width = 1000, panel = 360;
  std::vector<std::string> groups, series;
  if (!reports.empty())
    for (const auto& [category, summary] : reports[0].categories) groups.push_back(category);
  groups.push_back("overall");
  const bool costed = !reports.empty() && !reports[0].cost_source.empty();
  std::vector<std::vector<double>> tau, speedup;
  for (const Report& r : reports) {
    series.push_back(r.combination().empty() ? "none" : r.combination());
    auto& t = tau.emplace_back();
    auto& s = speedup.emplace_back();
    for (const auto& [category, summary] : r.categories) {
      t.push_back(summary.tau());
      s.push_back(summary.speedup());
    }
    t.push_back(r.overall.tau());
    s.push_back(r.overall.speedup());
  }
  const double height = panel * (costed ? 2 : 1);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  const int budget = reports.empty() ? 0 : reports[0].budget;
  svg += bar_panel(0, fmt::format("tau (tokens per target call, bonus token included), budget {}", budget),
                   fmt::format("{} turns", reports.empty() ? 0 : reports[0].overall.turns), "tau", groups, series, tau,
                   1.0);
  if (costed)
    svg += bar_panel(panel, "speedup over plain decoding (dashed: plain decoding)", "time " + reports[0].cost_source,
                     "speedup", groups, series, speedup, 1.0);
  svg += "</svg>\n";
  return svg;
}

nlohmann::ordered_json to_json(const ModelledRun& run) {
  nlohmann::ordered_json combinations = nlohmann::ordered_json::object();
  for (const auto& r : run.reports)
    combinations[r.combination()] = {{"tau", r.overall.tau()},
                                     {"tokens_per_second", r.overall.tokens_per_second()},
                                     {"speedup", r.overall.speedup()}};
  return {{"source", run.source}, {"combinations", combinations}};
}

std::string prediction_line(const Prediction& p) {
  return fmt::format("the cost model's prediction for these steps: speedup {:.3f}, measured {:.3f} (predicted / "
                     "measured = {:.3f}), by {}",
                     p.predicted, p.measured, p.ratio(), p.source);
}

nlohmann::ordered_json to_json(const Prediction& p) {
  return {{"source", p.source},
          {"predicted_speedup", p.predicted},
          {"measured_speedup", p.measured},
          {"ratio", p.ratio()}};
}

}  // namespace specbench
