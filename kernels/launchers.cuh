// Where the CUDA kernels are compiled. By default (a header library) every launcher of the step's
// kernels (tree build, greedy and stochastic verification, suffix matching, KV compaction) and of
// the tensor-core products is an inline function, and the kernels it launches are compiled in
// every .cu file that includes it, whether the file launches them or not (some 20 kernels: 4 s of
// nvcc a file on a 2-core VM). A program of many such files may define
// SPECDEC_CUDA_KERNELS_EXTERN in all of them (they then only declare the launchers) and compile
// one more file that defines SPECDEC_CUDA_KERNELS_IMPLEMENTATION and includes
// <specdec/backend.hpp> and <specdec/kernels/llama_forward.cuh> (CMake, in this project's build:
// link specdec::cuda_kernels, src/cuda_kernels.cu), as SPECDEC_HOST_KERNELS_EXTERN does for the
// host kernels. The same code with the same flags: the same bits.
//
// A launcher is declared with SPECDEC_CUDA_LAUNCHER (its default arguments there), and defined,
// with SPECDEC_CUDA_LAUNCHER again, inside #if SPECDEC_CUDA_KERNELS_DEFINED.
#pragma once

#if defined(SPECDEC_CUDA_KERNELS_EXTERN) && !defined(SPECDEC_CUDA_KERNELS_IMPLEMENTATION)
#define SPECDEC_CUDA_LAUNCHER
#define SPECDEC_CUDA_KERNELS_DEFINED 0
#elif defined(SPECDEC_CUDA_KERNELS_IMPLEMENTATION)
#define SPECDEC_CUDA_LAUNCHER
#define SPECDEC_CUDA_KERNELS_DEFINED 1
#else
#define SPECDEC_CUDA_LAUNCHER inline
#define SPECDEC_CUDA_KERNELS_DEFINED 1
#endif
