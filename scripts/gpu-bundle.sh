#!/usr/bin/env bash
# Builds the GPU tests and the kernel benchmarks (CUDA required) and gathers them, with the CUDA
# runtime and the Debian libraries they link, into build/gpu-bundle: a folder that runs on a GPU
# machine that has a driver but none of the build dependencies (Catch2 and the rest are compiled
# in). cuBLAS (gpu_dense_search_gpu_test and specdec-dense-datastore's gpu-flat search) is too
# large to carry: it comes from that machine's CUDA toolkit (/usr/local/cuda). On that machine:
#   build/gpu-bundle/run.sh [LOG_DIR]    # every gpu test, the Python module's gpu tests,
#                                        # cuda_forward_bench, issue 46's specbench check, then the
#                                        # forward profiled by nsys, CudaLlamaTarget's kernels under
#                                        # compute-sanitizer and the step kernels' benchmarks: most
#                                        # important first, all within RUN_BUDGET_S (default 480 s)
#   SANITIZE=1 build/gpu-bundle/run.sh [LOG_DIR]   # the gpu tests under compute-sanitizer instead
# run.sh's header says what each environment variable changes (SPECBENCH=only|skip, TENSOR_CORES,
# DENSE_DS) and how to rehearse its specbench command lines without a GPU, on the emulated device.
# Issue 46's check (docs/specbench.md): the GPU cost table of the Llama-2-7B shape, lossless
# `model` runs on stories260K and BabyLlama-936K with energy per token (one with rejection
# sampling, one batched, one with CUDA graphs), the 40-turn timed replay on the Llama-2-7B shape
# for tree_history, its batch table (B = 4, 16, 64), then the replays of tree_history with CUDA
# graphs, casd, pld and tree, at --budget auto with tensor-core products.
# The Python module's GPU tests (ctest's python_gpu) run there with that machine's python3 (which
# has NumPy, pytest and PyTorch): the module is built here for its Python version, BUNDLE_PYTHON
# (default: a python3.12 on PATH or under pyenv; the lent GPU machines run 3.12), with pybind11
# fetched from PyPI into the build folder. No such interpreter here: the bundle goes without it,
# and run.sh says so.
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
# Runs the GPU checks in order of importance, each under its own time limit and all within
# RUN_BUDGET_S seconds (default 480) of the start, so that a slow first version still leaves the
# most important logs: every gpu test program; the Python module's gpu tests (python_gpu);
# cuda_forward_bench; issue 46's specbench check; then the diagnostics (the forward profiled by
# nsys, CudaLlamaTarget's kernels under compute-sanitizer) and the step kernels' benchmarks. A step
# the budget leaves no time for says so and counts as failed; any exit but 0 counts as a failure,
# 77 (skipped: no device) included, since this script is meant for a GPU machine. Logs go to $1
# (default .), one NAME.log a step, and summary.txt (each step's exit code and seconds).
#   SANITIZE=1     only the gpu tests, each under compute-sanitizer's memcheck, racecheck and
#                  synccheck (compute-sanitizer comes with the CUDA toolkit, not the driver)
#   SPECBENCH=only issue 46's specbench check alone; SPECBENCH=skip everything but it
#   TENSOR_CORES=0 the Llama-2-7B table and replays on CUDA cores (default: tensor cores)
#   DENSE_DS=FILE  also specdec-dense-datastore bench FILE --backend gpu-flat
# A rehearsal of the specbench check on a machine without a GPU (its command lines, on the
# emulated device and a small checkpoint): SPECBENCH=only SPECBENCH_DEVICE=emulated
#   SPECBENCH_TIMED_MODEL=FILE TENSOR_CORES=0 TURNS=2 BATCH_TURNS=8 RUN_BUDGET_S=3600 run.sh DIR
here="$(cd "$(dirname "$0")" && pwd)"
logs="${1:-.}"
started=$SECONDS
budget_s="${RUN_BUDGET_S:-480}"
mkdir -p "$logs"
export SPECDEC_DATA="${SPECDEC_DATA:-$here/data}"
export LD_LIBRARY_PATH="$here:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>&1 | tee "$logs/device.txt"
failed=0
note() { echo "$*" | tee -a "$logs/summary.txt"; }
# step NAME LIMIT_S COMMAND...: COMMAND > LOG_DIR/NAME.log, stopped after LIMIT_S seconds or what
# is left of the budget (exit 124: its log keeps what it printed).
step() {
  local name="$1" limit="$2"
  shift 2
  local left=$((budget_s - (SECONDS - started)))
  if [ "$left" -lt 10 ]; then
    note "$name: not run (the run's $budget_s s are spent)"
    failed=1
    return
  fi
  [ "$limit" -le "$left" ] || limit="$left"
  echo "+ $* (limit ${limit} s)" >"$logs/$name.log"
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$logs/$name.log" 2>&1
  local rc=$?
  note "$name: exit $rc ($((SECONDS - t0)) s)"
  [ "$rc" -eq 0 ] || failed=1
}
mode="${SPECBENCH:-after}"

if [ "${SANITIZE:-0}" = 1 ]; then
  command -v compute-sanitizer >/dev/null || { echo "SANITIZE=1: compute-sanitizer not found" >&2; exit 2; }
  for t in "$here"/*_gpu_test; do
    for tool in memcheck racecheck synccheck; do
      step "$(basename "$t").$tool" 240 compute-sanitizer --tool "$tool" --error-exitcode 99 "$t"
    done
  done
  note "failed: $failed ($((SECONDS - started)) s)"
  exit "$failed"
fi

if [ "$mode" != only ]; then
  for t in "$here"/*_gpu_test; do step "$(basename "$t")" 120 "$t"; done
  # The Python module's CUDA verification (ctest's python_gpu), with this machine's python3 if it
  # is the version the module was built for and has NumPy, pytest and PyTorch.
  if [ ! -f "$here/python/version" ]; then
    note "python_gpu: not run (the bundle holds no Python module)"
    failed=1
  elif ! python3 -c "import sys, numpy, pytest, torch; sys.exit('%d.%d' % sys.version_info[:2] != '$(cat "$here/python/version")')" 2>/dev/null; then
    note "python_gpu: not run (python3 is not Python $(cat "$here/python/version") with NumPy, pytest and PyTorch)"
    failed=1
  else
    PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" SPECDEC_SKIP_WITHOUT_RUN=1 \
      step python_gpu 120 python3 -m pytest "$here/python/tests" -q -p no:cacheprovider -m gpu -rs
  fi
  # c(n) of the four shapes and the products against cuBLAS: a slower first version still leaves its lines.
  step cuda_forward_bench 120 "$here/cuda_forward_bench"
fi

# Issue 46's check (docs/specbench.md, --device cuda), most important first. The replays run one
# round each (a GPU repeats its passes within noise, and a 40-turn round of Llama-2-7B is about a
# minute).
if [ "$mode" != skip ]; then
  device="${SPECBENCH_DEVICE:-cuda}"
  timed="${SPECBENCH_TIMED_MODEL:-synthetic:Llama-2-7B}"
  if [ "${timed#synthetic:}" != "$timed" ]; then of_timed=(--synthetic "${timed#synthetic:}"); else of_timed=(--model "$timed"); fi
  turns="${TURNS:-40}"
  models="$SPECDEC_DATA/models"
  table="$logs/cost-llama2-7b.json"
  tc=(--tensor-cores)  # the Llama-2-7B shape's products (its weights are bf16)
  [ "${TENSOR_CORES:-1}" = 1 ] || tc=()
  specbench() { step "specbench_$1" "$2" "$here/specbench" "${@:3}"; }
  specbench calibrate 60 calibrate --device "$device" "${tc[@]}" "${of_timed[@]}" --out "$table"
  specbench model_stories260K 60 model --device "$device" --drafter tree_history --model "$models/stories260K.bin" \
    --tokenizer "$models/tok512.bin" --json "$logs/specbench_model_stories260K.json"
  cost=()
  [ -f "$table" ] && cost=(--cost "$table")  # else each replay calibrates at start-up
  replay() {  # NAME DRAFTER [OPTION...]: the timed replay of $turns turns on the Llama-2-7B shape
    specbench "replay_$1" 120 replay --device "$device" "${tc[@]}" --timed-model "$timed" --drafter "$2" \
      --turns "$turns" --warm-history --budget auto --min-rounds 1 --min-seconds 0 "${@:3}" \
      --json "$logs/specbench_replay_$1.json"
  }
  replay tree_history tree_history "${cost[@]}"
  # The batch table on the Llama-2-7B shape: 64 turns decoded 4, 16 and 64 at a time (B = 1 is the
  # single replay), the automatic budget calibrated at start-up.
  specbench replay_batch 120 replay --device "$device" "${tc[@]}" --timed-model "$timed" --drafter tree_history \
    --batch 4,16,64 --max-turns "${BATCH_TURNS:-64}" --budget auto --min-rounds 1 --min-seconds 0 \
    --json "$logs/specbench_replay_batch.json" --plot "$logs/specbench_replay_batch.svg"
  specbench model_babyllama 60 model --device "$device" --drafter casd --model "$models/babyllama-936K.bin" \
    --tokenizer "$models/tok105.bin" --task retell --json "$logs/specbench_model_babyllama.json"
  specbench model_rejection 40 model --device "$device" --drafter tree_history --verifier rejection \
    --temperature 0.8 --seed 1 --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" --task stories \
    --json "$logs/specbench_model_rejection.json"
  specbench model_batch 40 model --device "$device" --drafter tree_history --batch 1,4,16 \
    --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" --json "$logs/specbench_model_batch.json"
  specbench model_graphs 40 model --device "$device" --graphs --drafter tree_history \
    --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" --json "$logs/specbench_model_graphs.json"
  # tree_history's replay again with CUDA graphs (no launch latency in plain decoding or in the
  # steps), its budget from a calibration with graphs at start-up.
  replay graphs_tree_history tree_history --graphs
  for drafter in casd pld tree; do replay "$drafter" "$drafter" "${cost[@]}"; done
fi

if [ "$mode" != only ]; then
  # Where a plain step's and a 16-node tree's time goes, kernel by kernel (Llama-2-7B, context
  # 512, tensor cores), if the machine has Nsight Systems: its table of kernels by total time.
  if command -v nsys >/dev/null; then
    step forward_profile 90 nsys profile --stats=true --force-overwrite true -o "$logs/forward_profile" \
      "$here/cuda_forward_bench" --forward-only --shapes Llama-2-7B --contexts 512 --nodes 1,16 --reps 20
  else
    note "nsys not found: no kernel-by-kernel profile of the forward"
  fi
  # CudaLlamaTarget's kernels under compute-sanitizer, on the test cases tagged [sanitize] (small
  # models, few forwards: a sanitizer makes every launch slow).
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      step "cuda_llama_gpu_test.sanitize.$tool" 75 compute-sanitizer --tool "$tool" --error-exitcode 99 \
        "$here/cuda_llama_gpu_test" "[sanitize]"
    done
  else
    note "compute-sanitizer not found: CudaLlamaTarget's kernels not sanitized"
    failed=1
  fi
  # The step kernels' benchmarks (measured on an H100 and an H200 before: docs/performance.md).
  step kernels_bench 60 "$here/kernels_bench"
  step decoder_step_bench 60 "$here/decoder_step_bench" --tokens 128
  [ -z "${DENSE_DS:-}" ] || step dense_bench 60 "$here/specdec-dense-datastore" bench "$DENSE_DS" --queries 200 --backend gpu-flat
fi
note "failed: $failed ($((SECONDS - started)) s)"
exit "$failed"
RUN
chmod +x "$bundle/run.sh"
du -sh "$bundle"
