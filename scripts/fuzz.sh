#!/usr/bin/env bash
# Longer fuzzing of the file loaders under libFuzzer with ASan and UBSan (docs/fuzzing.md).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 300)] [TARGET...]
#
# Targets: chat_template jsonl llama2c_checkpoint llama2c_tokenizer token_datastore dense_datastore
# ngram_model eagle_head (default: all). Builds into
# build/fuzz with clang; the corpus grows in build/fuzz/corpus/TARGET, failing inputs land in
# build/fuzz/crashes/TARGET. Commit a failing input, once fixed, to tests/fuzz/corpus/TARGET as
# regression-<what>, so that CTest replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(chat_template jsonl llama2c_checkpoint llama2c_tokenizer token_datastore dense_datastore ngram_model
  eagle_head)
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: needs clang++ with libFuzzer (Debian 12: apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DSPECDEC_CUDA=OFF -DSPECDEC_BUILD_EXAMPLES=OFF -DSPECDEC_LIBFUZZER=ON \
  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
cmake --build build/fuzz -j "$(nproc)" --target "${targets[@]/%/_libfuzzer}"
for t in "${targets[@]}"; do
  mkdir -p "build/fuzz/corpus/$t" "build/fuzz/crashes/$t"
  echo "== $t: ${seconds} s"
  "build/fuzz/tests/fuzz/${t}_libfuzzer" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=4096 \
    -artifact_prefix="build/fuzz/crashes/$t/" "build/fuzz/corpus/$t" "tests/fuzz/corpus/$t"
done
