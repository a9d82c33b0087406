// The host kernels' entry points and the model code that runs them (the decoder layer, the tree
// forward), compiled once (specdec::host_kernels): the programs that link it define
// SPECDEC_HOST_KERNELS_EXTERN and only declare them (models/kernels/isa.hpp). docs/targets.md
// shows the lines between the markers.
// [implementation]
#define SPECDEC_HOST_KERNELS_IMPLEMENTATION
#include <specdec/targets/llama2c_forward.hpp>
// [implementation]
