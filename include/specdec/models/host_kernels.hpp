// Host kernels of the weights-once transformer forward (models/llama_layer.hpp): packed weight
// matrices, a tiled matrix product that reads each weight once for all tokens of a call, and the
// attention inner loops. This header includes them all (models/kernels/, listed at the end).
//
// Reduction order (what makes a tree forward bit-exact): every output element is computed by the
// same sequence of IEEE operations whatever the number of tokens, the tile it falls in, the ISA
// path or the thread that runs it:
//   matmul:  y[i][r] = 0; then y[i][r] ⊕= W[r][j] * x[i][j] for j = 0, 1, ..., in - 1;
//   scores:  s = 0; s ⊕= q[e] * k[e] for e = 0 .. head_size - 1; then s / sqrt(head_size) (computed
//            as s * (1 / sqrt(head_size)) where sqrt(head_size) is a power of two: the same bits);
//   softmax: over a row s[0 .. T) (the node's sequence, position t = index in the row):
//            m = max (exact, so its order does not matter); e[t] = exp16(s[t] - m) (below);
//            the sum in a fixed blocked order that depends only on T: 16 lane sums a[l] = +0,
//            a[l] += e[t] for t ≡ l (mod 16) in increasing t; then a[l] += a[l + 8] (l < 8),
//            a[l] += a[l + 4] (l < 4), a[l] += a[l + 2] (l < 2), a[0] += a[1];
//   values:  o[e] = 0; o[e] ⊕= e[t] * v[t][e] for the node's sequence t in order; then o[e] / a[0]
//            (normalising the head_size outputs instead of the T weights: one division each);
//   swiglu:  a * (1 / (1 + exp16(-a))) * b.
// exp16(x): no libm; x clamped to [-87.3, 88.3], n = (x * log2(e) + 1.5·2^23) - 1.5·2^23 (round to
// nearest), r = (x - n * ln2_hi) - n * ln2_lo, p = Horner of exp's Taylor polynomial of degree 7
// in r (from the highest coefficient, each step q = c; q ⊕= p * r; p = q), result p * 2^n; 0 for
// x < -87.3. Within 1.2 ulp of exp (0.93 with the fused steps; libm's expf: 0.5).
// where a ⊕= b * c is one fused multiply-add (a single rounding) on the AVX2 and AVX-512 paths and
// a multiply, then an add, on the portable path. Vector lanes hold different output elements
// (outputs × tokens, or sequence slots), or the 16 softmax lane sums above (16 on every ISA: 1, 2
// or 4 vectors), never parts of one sum in another order, and a loop's leftover elements get the
// same operation as its lanes. So a result depends on the path a forward runs (fused or not),
// never on the number of tokens or threads. Everything else multiplies and adds separately, which
// needs -ffp-contract=off (CMake: the specdec::host_models target carries it), as
// core/portable_math.hpp does; the fused operations are intrinsics (one instruction each), which
// that flag does not touch. Choosing the kernels (isa.hpp's kernels()) throws where the code was
// compiled with contraction.
//
// ISA (isa.hpp): a target's Options::isa, or for HostIsa::automatic the environment variable
// SPECDEC_HOST_ISA (auto, portable, avx2, avx512; read once per process), else the best the CPU
// has: AVX-512F, else AVX2, else portable (GCC/Clang vector extensions lowered to the baseline
// ISA), with __builtin_cpu_supports on x86-64 GCC/Clang. An ISA the CPU lacks is refused with a
// sentence. Defining SPECDEC_HOST_ISA_PORTABLE (CMake: -DSPECDEC_HOST_ISA=portable) compiles only
// the portable path.
//
// bf16 weights (WeightFormat::bf16, opt-in): matrices stored as bfloat16 (rounded to nearest even
// from the checkpoint's fp32) and multiplied with Intel AMX (TDPBF16PS), the matrix's inputs
// rounded to bf16 the same way, fp32 accumulation. Half the bytes per forward, and AMX computes
// a forward of many tokens at little more than the cost of reading the weights. It is another
// model's numbers than fp32 (as a checkpoint served in bf16 is), but a bit-exact one: y[i][r] is
// 0, then one TDPBF16PS per 32 inputs in increasing order, each a function of token i's row and
// column r alone (AMX computes every row of a tile independently), whatever the number of tokens
// or threads. Where the heads hold 16 values or a multiple of 32 (bf16_attention()), the KV cache
// is bf16 too (half the bytes a step reads) and attention runs on AMX: a score is the query,
// scaled by 1/sqrt(head_size) and rounded to bf16, times the key, one TDPBF16PS per 32 dimensions
// (all 16 of a head of 16) in order; the softmax as above; a value sum o[e] is 0, then one TDPBF16PS per 32 slots of the
// node's sequence in order, the weights exp(s - m) rounded to bf16, then o[e] / a[0]. Needs a CPU
// with AMX-BF16 and a Linux kernel that grants a process the tile state (arch_prctl); there is no
// other bf16 path, so elsewhere such a model refuses to load. Host-only.
//
// The files, in models/kernels/:
//   platform.hpp          what the build and CPU can use (mmap, x86-64 paths, AMX), bf16_unavailable
//   memory.hpp            PrefaultedAllocator: mapped, prefaulted, huge-page memory
//   packing.hpp           WeightFormat, Matrix: weights packed in 64-column tiles (or AMX blocks)
//   lanes.hpp             vector lanes, the fused multiply-add, exp16, lane reductions
//   fp32_matmul.hpp       the fp32 product's register tiles (RegisterTile, MatmulTiles)
//   fp32_attention.hpp    scores, the softmax's exp_sum, value sums (head_value_sums, node_value_sums)
//   fp32_elementwise.hpp  swiglu, argmax
//   isa.hpp               each ISA's table of fp32 kernels (Kernels), HostIsa and the choice of one
//   amx.hpp               the bf16 kernels on AMX
// The thread pool that runs them is models/thread_pool.hpp.
#pragma once

#include <specdec/models/kernels/amx.hpp>
#include <specdec/models/kernels/isa.hpp>
#include <specdec/models/kernels/memory.hpp>
#include <specdec/models/kernels/packing.hpp>
#include <specdec/models/kernels/platform.hpp>
