// The command-line options of the dense search backend (dense_search_choice.hpp), shared by
// specdec-dense-datastore (--backend, --ivf-lists, ...) and specbench model (--dresd-search,
// --dresd-ivf-lists, ...).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "common/cli_values.hpp"
#include "common/dense_search_choice.hpp"

namespace specdec::tools {

/// Adds `backend_option` (e.g. "--backend") and FAISS's parameters, each named --PREFIXivf-lists,
/// --PREFIXivf-nprobe, --PREFIXhnsw-m, --PREFIXhnsw-ef-search, --PREFIXhnsw-ef-construction.
inline void add_dense_search_options(CLI::App& cmd, DenseSearchChoice& c, const std::string& backend_option,
                                     const std::string& prefix) {
  cmd.add_option(backend_option, c.backend,
                 "Dense search backend: exact (default), faiss-flat, faiss-ivf, faiss-hnsw (FAISS builds) or gpu-flat "
                 "(CUDA builds, on a device)")
      ->transform(one_of(dense_search_backends));
  const FaissOptions defaults;
  cmd.add_option("--" + prefix + "ivf-lists", c.faiss.ivf_lists,
                 "faiss-ivf: k-means lists (default " + std::to_string(defaults.ivf_lists) + ")")
      ->transform(whole_number_in(1, 1 << 24));
  cmd.add_option("--" + prefix + "ivf-nprobe", c.faiss.ivf_nprobe,
                 "faiss-ivf: lists scanned per query (default " + std::to_string(defaults.ivf_nprobe) + ")")
      ->transform(whole_number_in(1, 1 << 24));
  cmd.add_option("--" + prefix + "hnsw-m", c.faiss.hnsw_m,
                 "faiss-hnsw: graph degree (default " + std::to_string(defaults.hnsw_m) + ")")
      ->transform(whole_number_in(2, 1 << 16));
  cmd.add_option("--" + prefix + "hnsw-ef-search", c.faiss.hnsw_ef_search,
                 "faiss-hnsw: candidates kept while searching (default " + std::to_string(defaults.hnsw_ef_search) + ")")
      ->transform(whole_number_in(1, 1 << 20));
  cmd.add_option("--" + prefix + "hnsw-ef-construction", c.faiss.hnsw_ef_construction,
                 "faiss-hnsw: candidates kept while building (default " +
                     std::to_string(defaults.hnsw_ef_construction) + ")")
      ->transform(whole_number_in(1, 1 << 20));
}

}  // namespace specdec::tools
