#include "cost_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ostream>

#include <fmt/format.h>

namespace specbench {

namespace {

// The table's matrix_product_gflops, if any: one thread's figure against all threads'. Threads that
// add less than half of one thread's arithmetic each share cores: a tree's extra nodes, which are
// arithmetic, then gain little from them.
void print_matrix_product_line(std::ostream& out, const nlohmann::ordered_json& metadata) {
  if (!metadata.contains("matrix_product_gflops")) return;
  const auto& gflops = metadata["matrix_product_gflops"];
  if (!gflops.is_object() || gflops.size() != 2 || !gflops.contains("1")) return;
  const auto all = std::find_if(gflops.items().begin(), gflops.items().end(), [](const auto& item) { return item.key() != "1"; });
  const double threads = std::atof(all.key().c_str());
  if (!gflops["1"].is_number() || !all.value().is_number() || !(threads > 1)) return;
  const double one = gflops["1"].get<double>(), many = all.value().get<double>();
  out << fmt::format("  matrix product (the forward's kernel, 32 tokens, weights from cache): {:.1f} GFLOP/s on 1 thread, "
                     "{:.1f} on {} ({:.2f} x)\n",
                     one, many, all.key(), many / one);
  if (many - one < 0.5 * (threads - 1) * one)
    out << fmt::format("  {} threads add {:.0f} % to one thread's arithmetic where separate cores would add about {:.0f} %: "
                       "they share cores (SMT siblings, or virtual CPUs backed by one core), and a tree's extra nodes gain "
                       "little from them\n",
                       all.key(), 100 * (many / one - 1), 100 * (threads - 1));
}

}  // namespace

void print_cost_table(std::ostream& out, const CostTable& t) {
  out << "cost table: " << t.describe() << "\n";
  if (t.metadata.contains("model")) {
    const auto& m = t.metadata["model"];
    if (m.contains("config")) out << "  " << m["config"].get<std::string>() << "\n";
    if (m.value("synthetic_weights", false))
      out << "  SYNTHETIC weights (shape " << m.value("shape", "?") << "): timing only, the outputs are meaningless\n";
    if (m.contains("scaling")) out << "  layer-wise: " << m["scaling"].get<std::string>() << "\n";
  }
  if (t.metadata.contains("read_bandwidth_gbs"))
    out << fmt::format("  read bandwidth (one core, sum of a 1 GiB array): {} GB/s\n", t.metadata["read_bandwidth_gbs"].dump());
  print_matrix_product_line(out, t.metadata);
  out << fmt::format("forward time in us (median of {}); tree: a chain of n nodes, the root included\n\n",
                     t.metadata.contains("repetitions") ? t.metadata["repetitions"].dump() : "?");
  out << fmt::format("{:>8} {:>10}", "context", "plain");
  for (const int n : t.nodes) out << fmt::format(" {:>10}", fmt::format("n={}", n));
  out << "\n";
  for (const auto& c : t.contexts) {
    out << fmt::format("{:>8} {:>10.1f}", c.context, c.plain_us);
    for (const double us : c.forward_us) out << fmt::format(" {:>10.1f}", us);
    out << "\n";
  }
  out << "\nc(n) / c(1): a forward of n nodes in units of a one-node forward (n when it costs n forwards)\n";
  out << fmt::format("{:>8} {:>10}", "context", "");
  for (const int n : t.nodes) out << fmt::format(" {:>10}", fmt::format("n={}", n));
  out << "\n";
  for (const auto& c : t.contexts) {
    out << fmt::format("{:>8} {:>10}", c.context, "");
    for (const double us : c.forward_us) out << fmt::format(" {:>10.2f}", us / c.forward_us.front());
    out << "\n";
  }
}

std::string cost_svg(const CostTable& t) {
  constexpr double width = 760, height = 480, left = 70, right = 150, top = 50, bottom = 60;
  constexpr const char* colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double lx0 = std::log2(static_cast<double>(t.nodes.front())), lx1 = std::log2(static_cast<double>(t.max_nodes()));
  // Both axes in log2: n separate forwards are the diagonal, a free extra token a flat line.
  double y_top = 1;
  for (const auto& c : t.contexts)
    for (const double us : c.forward_us) y_top = std::max(y_top, us / c.forward_us.front());
  const double ly_max = std::max(1.0, std::ceil(std::log2(std::max(y_top, static_cast<double>(t.max_nodes())))));
  const auto x_of = [&](double n) {
    return left + (lx1 > lx0 ? plot_w * (std::log2(n) - lx0) / (lx1 - lx0) : 0.0);
  };
  const auto y_of = [&](double r) { return top + plot_h * (1.0 - std::clamp(std::log2(r), 0.0, ly_max) / ly_max); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  std::string model = "?";
  if (t.metadata.contains("model")) {
    const auto& m = t.metadata["model"];
    model = m.value("shape", m.value("file", std::string("?")));
    if (m.value("synthetic_weights", false)) model += " shape, synthetic weights";
  }
  svg += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">Forward of n tree nodes / "
                     "forward of 1 node: {}</text>\n",
                     left + plot_w / 2, model);
  svg += fmt::format("<text x=\"{}\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n", left + plot_w / 2,
                     fmt::format("{}, {} thread(s), chain trees", t.metadata.value("machine", std::string("?")),
                                 t.metadata.contains("threads") ? t.metadata["threads"].dump() : "?"));
  for (int tick = 0; tick <= static_cast<int>(ly_max); ++tick) {
    const double r = std::exp2(tick);
    svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left, left + plot_w,
                       y_of(r), y_of(r));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 6, y_of(r) + 4, r);
  }
  for (const int n : t.nodes) {
    svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/>\n", x_of(n), top,
                       top + plot_h);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(n), top + plot_h + 16, n);
  }
  // c(n) = n c(1): what n separate forwards would cost (cut at the top of the plot).
  const std::string ideal = fmt::format("{:.1f},{:.1f} {:.1f},{:.1f}", x_of(t.nodes.front()), y_of(t.nodes.front()),
                                        x_of(t.max_nodes()), y_of(t.max_nodes()));
  svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#999\" stroke-dasharray=\"5 4\"/>\n", ideal);
  for (std::size_t c = 0; c < t.contexts.size(); ++c) {
    const auto& row = t.contexts[c];
    std::string points;
    for (std::size_t i = 0; i < t.nodes.size(); ++i)
      points += fmt::format("{:.1f},{:.1f} ", x_of(t.nodes[i]), y_of(row.forward_us[i] / row.forward_us.front()));
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", points,
                       colors[c % 8]);
    for (std::size_t i = 0; i < t.nodes.size(); ++i)
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>context {}, n = {}: {:.1f} us, "
                         "{:.2f} x c(1)</title></circle>\n",
                         x_of(t.nodes[i]), y_of(row.forward_us[i] / row.forward_us.front()), colors[c % 8], row.context,
                         t.nodes[i], row.forward_us[i], row.forward_us[i] / row.forward_us.front());
    const double ly = top + 10 + 20 * static_cast<double>(c);
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"/>\n",
                       left + plot_w + 15, left + plot_w + 35, ly, colors[c % 8]);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">context {}</text>\n", left + plot_w + 40, ly + 4, row.context);
  }
  const double ly = top + 10 + 20 * static_cast<double>(t.contexts.size());
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#999\" stroke-dasharray=\"5 4\"/>\n",
                     left + plot_w + 15, left + plot_w + 35, ly);
  svg += fmt::format("<text x=\"{}\" y=\"{}\">n forwards</text>\n", left + plot_w + 40, ly + 4);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"black\"/>\n", left, left + plot_w,
                     top + plot_h);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, top + plot_h);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">n: tree nodes in one forward (a chain, the root "
                     "included; log scale)</text>\n",
                     left + plot_w / 2, height - 18);
  svg += fmt::format("<text transform=\"translate(20 {}) rotate(-90)\" text-anchor=\"middle\">c(n) / c(1) (log scale)</text>\n",
                     top + plot_h / 2);
  svg += "</svg>\n";
  return svg;
}

}  // namespace specbench
