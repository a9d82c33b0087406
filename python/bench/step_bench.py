"""The module's per-step overhead against the same step called from C++.

    python3 python/bench/step_bench.py --cpp build/default/python/specdec_python_step_bench

A 64-node tree (a Fixed drafter: 8 chains of 8), vocabulary 32000, logits on the CPU computed
once (step_shape.hpp): Python calls draft(), verify(logits), commit() per step; the C++ side
(step_bench.cpp) runs SpeculativeDecoder::step() on a target that hands out the same logits.
Prints microseconds per step of both and their ratio, for greedy and rejection sampling.
"""
import argparse
import subprocess
import time

import numpy as np

import specdec

VOCAB, CHAINS, DEPTH = 32000, 8, 8
NODES = CHAINS * DEPTH


def shape():
    """The arrays of step_shape.hpp."""
    parents = [0 if k % DEPTH == 0 else k for k in range(NODES)]
    tokens = [100 + k for k in range(NODES)]
    ripple = (np.arange(VOCAB, dtype=np.int64) * 7919 % 1000).astype(np.float32) / np.float32(1000)
    logits = np.tile(ripple, (NODES + 1, 1))
    for d in range(DEPTH + 1):
        logits[d, 100 + d if d < DEPTH else 5] = 10.0
    prompt = [i * 31 % 997 for i in range(512)]
    return parents, tokens, logits, prompt


def python_step_us(verifier, steps):
    parents, tokens, logits, prompt = shape()
    decoder = specdec.Decoder(VOCAB, [specdec.drafters.Fixed(parents, tokens)], verifier=verifier, budget=NODES)
    decoder.begin(prompt)

    def step():
        tree = decoder.draft()
        decoder.verify(logits)
        decoder.commit()
        return len(tree)

    assert step() == NODES + 1
    for _ in range(99):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps * 1e6, decoder.stats.tau


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpp", required=True, help="the specdec_python_step_bench program")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=5, help="best of this many runs of each")
    a = p.parse_args()
    for kind, make in (("greedy", specdec.Greedy), ("rejection", lambda: specdec.RejectionSampling(temperature=1.0, seed=1))):
        py = min(python_step_us(make(), a.steps)[0] for _ in range(a.repeats))
        cpp = min(float(subprocess.run([a.cpp, kind, str(a.steps)], capture_output=True, text=True, check=True).stdout)
                  for _ in range(a.repeats))
        print(f"{kind}: Python {py:.2f} us/step, C++ {cpp:.2f} us/step, ratio {py / cpp:.3f} "
              f"(64-node tree, vocabulary 32000, best of {a.repeats} x {a.steps} steps)")


if __name__ == "__main__":
    main()
