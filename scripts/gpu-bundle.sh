#!/usr/bin/env bash
# Builds the GPU tests and the kernel benchmarks (CUDA required) and gathers them, with the CUDA
# runtime they link, into build/gpu-bundle: a folder that runs on a GPU machine that has a driver
# but none of the build dependencies (Catch2 and the rest are compiled in). On that machine:
#   build/gpu-bundle/run.sh [LOG_DIR]    # every gpu test, then kernels_bench and decoder_step_bench
#   SANITIZE=1 build/gpu-bundle/run.sh [LOG_DIR]   # the gpu tests under compute-sanitizer instead
#                                                  # (memcheck, racecheck, synccheck; slow)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset cuda >/dev/null
tests=(tree_build_gpu_test greedy_verify_gpu_test stochastic_verify_gpu_test suffix_match_gpu_test
       kv_compaction_gpu_test step_gpu_test backend_step_gpu_test)
cmake --build --preset cuda -j "$(nproc)" --target "${tests[@]}" kernels_bench decoder_step_bench
bundle=build/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle"
for t in "${tests[@]}"; do cp "build/cuda/tests/$t" "$bundle/"; done
cp build/cuda/bench/kernels_bench build/cuda/bench/decoder_step_bench "$bundle/"
cp -L "$(ldd build/cuda/bench/kernels_bench | awk '/libcudart/ {print $3}')" "$bundle/"
cat > "$bundle/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every GPU test, then the benchmarks; logs go to $1 (default .). Any exit but 0 counts as a
# failure, 77 (skipped: no device) included, since this script is meant for a GPU machine.
# With SANITIZE=1: only the tests, each under compute-sanitizer's memcheck, racecheck and synccheck
# (compute-sanitizer comes with the CUDA toolkit, not the driver).
here="$(cd "$(dirname "$0")" && pwd)"
logs="${1:-.}"
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>&1 | tee "$logs/device.txt"
if [ "${SANITIZE:-0}" = 1 ] && ! command -v compute-sanitizer >/dev/null; then
  export PATH="/usr/local/cuda/bin:$PATH"
  command -v compute-sanitizer >/dev/null || { echo "SANITIZE=1: compute-sanitizer not found" >&2; exit 2; }
fi
failed=0
for t in "$here"/*_gpu_test; do
  name="$(basename "$t")"
  if [ "${SANITIZE:-0}" = 1 ]; then
    for tool in memcheck racecheck synccheck; do
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$t" >"$logs/$name.$tool.log" 2>&1
      rc=$?
      echo "$name ($tool): exit $rc" | tee -a "$logs/summary.txt"
      [ "$rc" -eq 0 ] || failed=1
    done
  else
    "$t" >"$logs/$name.log" 2>&1
    rc=$?
    echo "$name: exit $rc" | tee -a "$logs/summary.txt"
    [ "$rc" -eq 0 ] || failed=1
  fi
done
if [ "${SANITIZE:-0}" != 1 ]; then
  "$here/kernels_bench" >"$logs/kernels_bench.txt" 2>&1 || failed=1
  "$here/decoder_step_bench" --tokens 128 >"$logs/decoder_step_bench.txt" 2>&1 || failed=1
fi
echo "failed: $failed" | tee -a "$logs/summary.txt"
exit "$failed"
RUN
chmod +x "$bundle/run.sh"
du -sh "$bundle"
