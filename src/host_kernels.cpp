// The host kernels' entry points compiled once (specdec::host_kernels): the programs that link it
// define SPECDEC_HOST_KERNELS_EXTERN and only declare them (models/kernels/isa.hpp).
#define SPECDEC_HOST_KERNELS_IMPLEMENTATION
#include <specdec/models/kernels/isa.hpp>
