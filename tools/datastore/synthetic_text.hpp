// Synthetic token documents for measuring datastore builds and drafting at sizes no shared corpus
// reaches (docs/performance.md): Zipf-distributed tokens (exponent 1.1, like word frequencies)
// with copies of earlier passages (4 to 32 tokens, from anywhere before, at 5% of positions), so
// that suffixes repeat as in real text. Deterministic for a seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <specdec/index/token_file.hpp>

namespace specdec::tools {

inline TokenDocuments synthetic_documents(std::uint64_t tokens, std::uint32_t vocab, std::uint64_t seed) {
  std::vector<double> cdf(vocab);
  double total = 0;
  for (std::uint32_t v = 0; v < vocab; ++v) cdf[v] = total += 1.0 / std::pow(v + 1.0, 1.1);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, total);
  TokenDocuments docs;
  docs.text.reserve(tokens + tokens / 200);
  std::vector<std::uint32_t> doc;
  while (docs.tokens() < tokens) {
    const std::uint64_t length = std::min<std::uint64_t>(200 + rng() % 1800, tokens - docs.tokens());
    doc.clear();
    while (doc.size() < length) {
      if (docs.text.size() > 64 && rng() % 20 == 0) {  // copy an earlier passage
        const std::size_t from = rng() % (docs.text.size() - 32), n = 4 + rng() % 29;
        for (std::size_t i = from; i < from + n && doc.size() < length && docs.text[i] != kDocumentEnd; ++i)
          doc.push_back(docs.text[i]);
      } else {
        const auto v = std::lower_bound(cdf.begin(), cdf.end(), uniform(rng)) - cdf.begin();
        doc.push_back(std::min(static_cast<std::uint32_t>(v), vocab - 1));
      }
    }
    docs.add(doc);
  }
  return docs;
}

}  // namespace specdec::tools
