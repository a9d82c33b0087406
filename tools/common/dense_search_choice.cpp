#include "common/dense_search_choice.hpp"

#include <memory>
#include <string>

#include <specdec/error.hpp>
#if SPECDEC_HAS_FAISS
#include <specdec/index/faiss_search.hpp>
#endif
#if SPECDEC_HAS_CUDA
#include "common/gpu_flat_search.hpp"
#endif

namespace specdec::tools {

std::string describe(const DenseSearchChoice& c) {
  const FaissOptions& f = c.faiss;
  if (c.backend == "faiss-ivf")
    return c.backend + " (" + std::to_string(f.ivf_lists) + " lists, nprobe " + std::to_string(f.ivf_nprobe) + ")";
  if (c.backend == "faiss-hnsw")
    return c.backend + " (M " + std::to_string(f.hnsw_m) + ", efSearch " + std::to_string(f.hnsw_ef_search) +
           ", efConstruction " + std::to_string(f.hnsw_ef_construction) + ")";
  return c.backend;
}

std::shared_ptr<const DenseSearch> make_dense_search(const std::shared_ptr<const DenseDatastore>& datastore,
                                                     const DenseSearchChoice& c) {
  if (c.backend == "exact") return std::make_shared<const ExactDenseSearch>(datastore);
  if (c.backend == "gpu-flat") {
#if SPECDEC_HAS_CUDA
    return make_gpu_flat_search(datastore);
#else
    throw error("dense search gpu-flat: this build has no CUDA (configure with the default or cuda preset where nvcc "
                "is installed)");
#endif
  }
  if (c.backend != "faiss-flat" && c.backend != "faiss-ivf" && c.backend != "faiss-hnsw")
    throw error("dense search: unknown backend '" + c.backend + "' (exact, faiss-flat, faiss-ivf, faiss-hnsw or gpu-flat)");
#if SPECDEC_HAS_FAISS
  FaissOptions options = c.faiss;
  options.index = c.backend == "faiss-flat"  ? FaissOptions::kind::flat
                  : c.backend == "faiss-ivf" ? FaissOptions::kind::ivf
                                             : FaissOptions::kind::hnsw;
  return std::make_shared<const FaissDenseSearch>(datastore, options);
#else
  throw error("dense search " + c.backend + ": this build has no FAISS (install libfaiss-dev and reconfigure)");
#endif
}

}  // namespace specdec::tools
