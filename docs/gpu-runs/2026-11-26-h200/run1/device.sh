#!/usr/bin/env bash
# One device call: gpu tests, benches, gpu-flat dense search, sanitizers. Logs -> $OUT/logs.tgz
here="$(cd "$(dirname "$0")" && pwd)"
L=/tmp/logs; mkdir -p $L
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
pack() { tar czf "$OUT/logs.tgz" -C /tmp logs; }
trap pack EXIT
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a $L/progress.txt; pack; }
{ nvidia-smi; nvidia-smi -q -d CLOCK; nvcc --version; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv; } >$L/device.txt 2>&1
head -20 $L/device.txt
cb=$(ldconfig -p | awk '/libcublas.so.13 / {print $NF; exit}'); [ -n "$cb" ] || cb=$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)
el "cublas: $cb"; [ -n "$cb" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname $cb)"
for t in "$here"/*_gpu_test; do
  n=$(basename $t); timeout 60 $t >$L/$n.log 2>&1; rc=$?; el "$n: exit $rc"; tail -3 $L/$n.log
done
timeout 90 "$here/kernels_bench" >$L/kernels_bench.txt 2>&1; el "kernels_bench exit $?"; cat $L/kernels_bench.txt
timeout 60 "$here/decoder_step_bench" --tokens 128 >$L/decoder_step_bench.txt 2>&1; el "decoder_step_bench exit $?"; cat $L/decoder_step_bench.txt
# dense datastore: synthetic random features (timing only), 1M and 4M keys, dim 64 -> key dim 32
mkdir -p /tmp/ds && python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
for n in (1_000_000, 4_000_000):
    toks = rng.integers(0, 512, size=n, dtype=np.uint32)
    docs = toks.reshape(-1, 1000)
    sep = np.full((docs.shape[0], 1), 0xFFFFFFFF, dtype=np.uint32)
    np.concatenate([docs, sep], axis=1).tofile(f"/tmp/ds/tok{n}.bin")
    rng.standard_normal((n, 64), dtype=np.float32).tofile(f"/tmp/ds/feat{n}.f32")
PY
el "synthetic features written"
for n in 1000000 4000000; do
  timeout 60 "$here/specdec-dense-datastore" build --tokens /tmp/ds/tok$n.bin --features /tmp/ds/feat$n.f32 --out /tmp/ds/ds$n.dense --key-dim 32 --vocab 512 >>$L/dense.txt 2>&1
  el "build $n exit $?"
  timeout 90 "$here/specdec-dense-datastore" bench /tmp/ds/ds$n.dense --queries 200 --backend gpu-flat >>$L/dense.txt 2>&1
  el "bench gpu-flat $n exit $?"
  timeout 60 "$here/specdec-dense-datastore" bench /tmp/ds/ds$n.dense --queries 50 >>$L/dense.txt 2>&1
  el "bench exact $n exit $?"
done
cat $L/dense.txt | grep -v "^\[" | tail -12
for tool in memcheck synccheck racecheck; do
  for t in "$here"/*_gpu_test; do
    n=$(basename $t)
    timeout 30 compute-sanitizer --tool $tool --error-exitcode 99 $t >$L/$n.$tool.log 2>&1; rc=$?
    el "$n $tool: exit $rc"; [ $rc = 0 ] || tail -15 $L/$n.$tool.log
  done
done
el done
