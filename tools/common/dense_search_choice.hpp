// The dense search backend chosen on the command line of specdec-dense-datastore (--backend) and
// specbench model (--dresd-search): its name and parameters, and the DenseSearch they name.
// Built into specdec_dense_search (tools/common/CMakeLists.txt), which links FAISS where it is
// installed and the GPU flat search where the CUDA backend is built; the options themselves are
// in dense_search_options.hpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_search.hpp>

namespace specdec::tools {

/// A backend by name and FAISS's parameters (the index kind follows from the name).
struct DenseSearchChoice {
  std::string backend = "exact";
  FaissOptions faiss;
};

inline const std::vector<std::string> dense_search_backends = {"exact", "faiss-flat", "faiss-ivf", "faiss-hnsw",
                                                               "gpu-flat"};

/// The backend and the parameters it uses, e.g. "faiss-ivf (4096 lists, nprobe 16)".
std::string describe(const DenseSearchChoice& c);

/// The backend `c` names over `datastore`. Throws specdec::error (one line) for a backend this
/// build lacks (FAISS, CUDA) or cannot start (no CUDA device), and the backend's own errors.
std::shared_ptr<const DenseSearch> make_dense_search(const std::shared_ptr<const DenseDatastore>& datastore,
                                                     const DenseSearchChoice& c);

}  // namespace specdec::tools
