// The dense datastore's builder compiled once (specdec::dense_builder): the programs that link it
// define SPECDEC_DENSE_BUILDER_EXTERN and only declare it (index/dense_datastore_builder.hpp).
#define SPECDEC_DENSE_BUILDER_IMPLEMENTATION
#include <specdec/index/dense_datastore_builder.hpp>
