// A cost table as `specbench calibrate` shows it: text on the terminal, SVG with --plot.
#pragma once

#include <iosfwd>
#include <string>

#include "cost_table.hpp"

namespace specbench {

/// The table as text: forward µs per n and context, and c(n) / c(1).
void print_cost_table(std::ostream& out, const CostTable& table);
/// c(n) / c(1) against n (log scale), one line per context, with the line c(n) = n c(1) (n
/// single-token forwards) for reference.
std::string cost_svg(const CostTable& table);

}  // namespace specbench
