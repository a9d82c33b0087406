#!/usr/bin/env bash
# Builds the GPU tests and the kernel benchmarks (CUDA required) and gathers them, with the CUDA
# runtime and the Debian libraries they link, into build/gpu-bundle: a folder that runs on a GPU
# machine that has a driver but none of the build dependencies (Catch2 and the rest are compiled
# in). cuBLAS (gpu_dense_search_gpu_test and specdec-dense-datastore's gpu-flat search) is too
# large to carry: it comes from that machine's CUDA toolkit (/usr/local/cuda). On that machine:
#   build/gpu-bundle/run.sh [LOG_DIR]    # every gpu test, then kernels_bench, decoder_step_bench and
#                                        # cuda_forward_bench (and, with nsys, its forwards profiled
#                                        # kernel by kernel), and CudaLlamaTarget's kernels under
#                                        # compute-sanitizer (memcheck, racecheck) on its small cases
#   DENSE_DS=FILE build/gpu-bundle/run.sh  # also specdec-dense-datastore bench FILE --backend gpu-flat
#   SANITIZE=1 build/gpu-bundle/run.sh [LOG_DIR]   # the gpu tests under compute-sanitizer instead
#                                                  # (memcheck, racecheck, synccheck; slow)
# After them, issue 46's check with specbench --device cuda (docs/specbench.md): the GPU cost table
# of the Llama-2-7B shape, lossless `model` runs on stories260K and BabyLlama-936K with energy per
# token (one with rejection sampling, one batched, one with CUDA graphs), the batch table of the
# Llama-2-7B shape (B = 4, 16, 64), and the 40-turn timed replay on the Llama-2-7B shape for
# tree_history (first; again with CUDA graphs after the graphs' lossless run), casd, pld and tree at
# --budget auto, in order of importance; every command under a time limit, the whole run.sh within
# RUN_BUDGET_S seconds (default 480) of its start. The Llama-2-7B table and replays run the
# tensor-core products (--tensor-cores; TENSOR_CORES=0 runs them on CUDA cores). SPECBENCH=only
# runs that check alone, SPECBENCH=skip leaves it out.
# The Python module's GPU tests (ctest's python_gpu) run there too, with that machine's python3
# (which has NumPy, pytest and PyTorch): the module is built here for its Python version,
# BUNDLE_PYTHON (default: a python3.12 on PATH or under pyenv; the lent GPU machines run 3.12), with
# pybind11 fetched from PyPI into the build folder. No such interpreter here: the bundle goes
# without it, and run.sh says so.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset cuda >/dev/null
# Every test program labelled gpu (tests/CMakeLists.txt: named *_gpu_test).
# python_gpu runs pytest on the module, not a program: it is built for the GPU machine's Python below.
mapfile -t tests < <(ctest --test-dir build/cuda -L gpu -N | awk '/Test +#/ && $3 ~ /_gpu_test$/ {print $3}')
[ "${#tests[@]}" -gt 0 ] || { echo "gpu-bundle: no test labelled gpu in build/cuda" >&2; exit 1; }
cmake --build --preset cuda -j "$(nproc)" --target "${tests[@]}" kernels_bench decoder_step_bench cuda_forward_bench \
  specdec_dense_datastore specbench
bundle=build/gpu-bundle
rm -rf "$bundle"
mkdir -p "$bundle"
programs=(build/cuda/bench/kernels_bench build/cuda/bench/decoder_step_bench build/cuda/bench/cuda_forward_bench
          build/cuda/tools/dense_datastore/specdec-dense-datastore build/cuda/bench/specbench/specbench)
for t in "${tests[@]}"; do programs+=("$(find build/cuda/tests -name "$t" -type f | head -1)"); done
cp "${programs[@]}" "$bundle/"
# The libraries they link that a bare machine lacks: all but glibc's, the C++ runtime, the driver
# (libcuda) and cuBLAS.
ldd "${programs[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  grep -Ev '^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt)\.so' |
  while read -r _ path; do cp -L "$path" "$bundle/"; done
# The Python module for the GPU machine's interpreter, and the test files that hold gpu tests with
# the helpers they import (conftest.py, device_memory.py).
has_headers() {  # PYTHON: it runs, and has its development headers
  "$1" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
    2>/dev/null
}
python=
if [ -n "${BUNDLE_PYTHON:-}" ]; then
  has_headers "$BUNDLE_PYTHON" || { echo "gpu-bundle: BUNDLE_PYTHON=$BUNDLE_PYTHON does not run, or has no Python.h" >&2; exit 1; }
  python="$BUNDLE_PYTHON"
else
  for candidate in python3.12 "$(pyenv root 2>/dev/null || echo ~/.pyenv)"/versions/3.12*/bin/python3.12; do
    if has_headers "$candidate"; then python="$candidate"; break; fi
  done
fi
if [ -n "$python" ]; then
  pydir=build/gpu-bundle-python
  [ -d "$pydir/pybind11/pybind11" ] || "$python" -m pip install -q --disable-pip-version-check \
    --root-user-action=ignore --target "$pydir/pybind11" 'pybind11>=2.11'
  cmake -S . -B "$pydir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECDEC_CUDA=ON -DSPECDEC_PYTHON=ON \
    -DSPECDEC_BUILD_TESTS=OFF -DSPECDEC_BUILD_EXAMPLES=OFF -DSPECDEC_BUILD_BENCH=OFF -DPython3_EXECUTABLE="$python" \
    -Dpybind11_DIR="$PWD/$pydir/pybind11/pybind11/share/cmake/pybind11" >/dev/null
  cmake --build "$pydir/build" -j "$(nproc)" --target specdec_python
  mkdir -p "$bundle/python/tests"
  cp "$pydir"/build/python/package/specdec.*.so "$bundle/python/"
  "$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' >"$bundle/python/version"
  for f in tests/python/*.py; do
    case "$(basename "$f")" in test_*) grep -q 'pytest.mark.gpu' "$f" || continue ;; esac
    cp "$f" "$bundle/python/tests/"
  done
else
  echo "gpu-bundle: no Python 3.12 with its headers here (BUNDLE_PYTHON chooses one): python_gpu will not run" >&2
fi
# The programs without their symbol tables: the bundle and the working tree travel within 64 MiB.
strip --strip-unneeded "${programs[@]/#*\//$bundle/}" $(ls "$bundle"/python/*.so 2>/dev/null)
# The two small real models and their tokenizers (5 MB; not in git) for the GPU target's tests.
data="${SPECDEC_DATA:-../shared/data}"
mkdir -p "$bundle/data/models"
for f in stories260K.bin tok512.bin babyllama-936K.bin tok105.bin; do
  if [ -f "$data/models/$f" ]; then cp "$data/models/$f" "$bundle/data/models/"
  else echo "gpu-bundle: $data/models/$f not found: cuda_llama_gpu_test will skip the cases that need it" >&2; fi
done
# specbench's replay: the Spec-Bench questions, Vicuna-7B's greedy answers and the Llama 2 tokenizer (2 MB).
mkdir -p "$bundle/data/specbench" "$bundle/data/tokenizers"
for f in specbench/question.jsonl specbench/vicuna-7b-v1.3-greedy.jsonl tokenizers/llama2.model; do
  if [ -f "$data/$f" ]; then cp "$data/$f" "$bundle/data/$f"
  else echo "gpu-bundle: $data/$f not found: the timed replay of run.sh will fail" >&2; fi
done
cat > "$bundle/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every GPU test, then the benchmarks; logs go to $1 (default .). Any exit but 0 counts as a
# failure, 77 (skipped: no device) included, since this script is meant for a GPU machine.
# With SANITIZE=1: only the tests, each under compute-sanitizer's memcheck, racecheck and synccheck
# (compute-sanitizer comes with the CUDA toolkit, not the driver).
here="$(cd "$(dirname "$0")" && pwd)"
logs="${1:-.}"
started=$SECONDS
mkdir -p "$logs"
export SPECDEC_DATA="${SPECDEC_DATA:-$here/data}"
export LD_LIBRARY_PATH="$here:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>&1 | tee "$logs/device.txt"
if [ "${SANITIZE:-0}" = 1 ] && ! command -v compute-sanitizer >/dev/null; then
  export PATH="/usr/local/cuda/bin:$PATH"
  command -v compute-sanitizer >/dev/null || { echo "SANITIZE=1: compute-sanitizer not found" >&2; exit 2; }
fi
failed=0
specbench_mode="${SPECBENCH:-after}"
[ "$specbench_mode" = only ] || for t in "$here"/*_gpu_test; do
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
if [ "${SANITIZE:-0}" != 1 ] && [ "$specbench_mode" != only ]; then
  # The Python module's CUDA verification (ctest's python_gpu), with this machine's python3 if it
  # is the version the module was built for and has NumPy, pytest and PyTorch.
  if [ ! -f "$here/python/version" ]; then
    echo "python_gpu: not run (the bundle holds no Python module)" | tee -a "$logs/summary.txt"
    failed=1
  elif ! python3 -c "import sys, numpy, pytest, torch; sys.exit('%d.%d' % sys.version_info[:2] != '$(cat "$here/python/version")')" 2>/dev/null; then
    echo "python_gpu: not run (python3 is not Python $(cat "$here/python/version") with NumPy, pytest and PyTorch)" |
      tee -a "$logs/summary.txt"
    failed=1
  else
    PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" SPECDEC_SKIP_WITHOUT_RUN=1 timeout 240 \
      python3 -m pytest "$here/python/tests" -q -p no:cacheprovider -m gpu -rs >"$logs/python_gpu.log" 2>&1
    rc=$?
    echo "python_gpu: exit $rc" | tee -a "$logs/summary.txt"
    [ "$rc" -eq 0 ] || failed=1
  fi
  "$here/kernels_bench" >"$logs/kernels_bench.txt" 2>&1 || failed=1
  "$here/decoder_step_bench" --tokens 128 >"$logs/decoder_step_bench.txt" 2>&1 || failed=1
  # At most 2 minutes (the whole run must fit in 6): a slower first version still leaves its lines.
  timeout 120 "$here/cuda_forward_bench" >"$logs/cuda_forward_bench.txt" 2>&1
  rc=$?
  echo "cuda_forward_bench: exit $rc" | tee -a "$logs/summary.txt"
  [ "$rc" -eq 0 ] || failed=1
  # Where a plain step's and a 16-node tree's time goes, kernel by kernel (Llama-2-7B, context
  # 512, tensor cores), if the machine has Nsight Systems: its table of kernels by total time.
  export PATH="$PATH:/usr/local/cuda/bin"
  if command -v nsys >/dev/null; then
    timeout 90 nsys profile --stats=true --force-overwrite true -o "$logs/forward_profile" "$here/cuda_forward_bench" \
      --forward-only --shapes Llama-2-7B --contexts 512 --nodes 1,16 --reps 20 >"$logs/forward_profile.txt" 2>&1
    echo "nsys profile of the forward: exit $?" | tee -a "$logs/summary.txt"
  else
    echo "nsys not found: no kernel-by-kernel profile of the forward" | tee -a "$logs/summary.txt"
  fi
  # CudaLlamaTarget's kernels under compute-sanitizer, on the test cases tagged [sanitize] (small
  # models, few forwards: a sanitizer makes every launch slow).
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      timeout 75 compute-sanitizer --tool "$tool" --error-exitcode 99 "$here/cuda_llama_gpu_test" "[sanitize]" \
        >"$logs/cuda_llama_gpu_test.$tool.log" 2>&1
      rc=$?
      echo "cuda_llama_gpu_test [sanitize] ($tool): exit $rc" | tee -a "$logs/summary.txt"
      [ "$rc" -eq 0 ] || failed=1
    done
  else
    echo "compute-sanitizer not found: CudaLlamaTarget's kernels not sanitized" | tee -a "$logs/summary.txt"
    failed=1
  fi
  if [ -n "${DENSE_DS:-}" ]; then
    "$here/specdec-dense-datastore" bench "$DENSE_DS" --queries 200 --backend gpu-flat >"$logs/dense_bench.txt" 2>&1 ||
      failed=1
  fi
fi
# Issue 46's check (docs/specbench.md, --device cuda). Each command gets at most its own limit and
# what is left of RUN_BUDGET_S; one that is stopped counts as failed (exit 124) and its log keeps
# what it printed (the timed replay prints a line per turn).
budget_s="${RUN_BUDGET_S:-480}"
specbench_step() {  # NAME LIMIT_S ARGS...: specbench ARGS > LOG_DIR/specbench_NAME.txt
  local name="$1" limit="$2"
  shift 2
  local left=$((budget_s - (SECONDS - started)))
  if [ "$left" -lt 10 ]; then
    echo "specbench $name: not run (the run's $budget_s s are spent)" | tee -a "$logs/summary.txt"
    failed=1
    return
  fi
  [ "$limit" -le "$left" ] || limit="$left"
  echo "+ specbench $* (limit ${limit} s)" >"$logs/specbench_$name.txt"
  timeout "$limit" "$here/specbench" "$@" >>"$logs/specbench_$name.txt" 2>&1
  local rc=$?
  echo "specbench $name: exit $rc" | tee -a "$logs/summary.txt"
  [ "$rc" -eq 0 ] || failed=1
}
if [ "${SANITIZE:-0}" != 1 ] && [ "$specbench_mode" != skip ]; then
  models="$SPECDEC_DATA/models"
  table="$logs/cost-llama2-7b.json"
  tc=(--tensor-cores)  # the Llama-2-7B shape's products (its weights are bf16)
  [ "${TENSOR_CORES:-1}" = 1 ] || tc=()
  specbench_step calibrate 60 calibrate --device cuda "${tc[@]}" --synthetic Llama-2-7B --out "$table"
  specbench_step model_stories260K 60 model --device cuda --drafter tree_history --model "$models/stories260K.bin" \
    --tokenizer "$models/tok512.bin" --json "$logs/specbench_model_stories260K.json"
  cost=()
  [ -f "$table" ] && cost=(--cost "$table")  # else each replay calibrates at start-up
  replay() {  # DRAFTER: the 40-turn timed replay on the Llama-2-7B shape
    specbench_step "replay_$1" 150 replay --device cuda "${tc[@]}" --timed-model synthetic:Llama-2-7B --drafter "$1" \
      --turns 40 --warm-history --budget auto "${cost[@]}" --json "$logs/specbench_replay_$1.json"
  }
  replay tree_history
  # The batch table on the Llama-2-7B shape: 64 turns decoded 4, 16 and 64 at a time (B = 1 is the
  # single replay), the automatic budget calibrated at start-up.
  specbench_step replay_batch 120 replay --device cuda "${tc[@]}" --timed-model synthetic:Llama-2-7B --drafter tree_history \
    --batch 4,16,64 --max-turns 64 --budget auto --min-rounds 1 --min-seconds 0 \
    --json "$logs/specbench_replay_batch.json" --plot "$logs/specbench_replay_batch.svg"
  specbench_step model_babyllama 60 model --device cuda --drafter casd --model "$models/babyllama-936K.bin" \
    --tokenizer "$models/tok105.bin" --task retell --json "$logs/specbench_model_babyllama.json"
  specbench_step model_rejection 40 model --device cuda --drafter tree_history --verifier rejection \
    --temperature 0.8 --seed 1 --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" --task stories \
    --json "$logs/specbench_model_rejection.json"
  specbench_step model_batch 40 model --device cuda --drafter tree_history --batch 1,4,16 \
    --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" --json "$logs/specbench_model_batch.json"
  specbench_step model_graphs 40 model --device cuda --graphs --drafter tree_history \
    --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" --json "$logs/specbench_model_graphs.json"
  # tree_history's replay again with CUDA graphs (no launch latency in plain decoding or in the
  # steps), its budget from a calibration with graphs at start-up.
  specbench_step replay_graphs_tree_history 150 replay --device cuda --graphs "${tc[@]}" --timed-model synthetic:Llama-2-7B \
    --drafter tree_history --turns 40 --warm-history --budget auto --json "$logs/specbench_replay_graphs_tree_history.json"
  for drafter in casd pld tree; do replay "$drafter"; done
fi
echo "failed: $failed" | tee -a "$logs/summary.txt"
exit "$failed"
RUN
chmod +x "$bundle/run.sh"
du -sh "$bundle"
