#!/usr/bin/env bash
here="$(cd "$(dirname "$0")" && pwd)"
L=/tmp/logs; mkdir -p $L
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
pack() { tar czf "$OUT/logs2.tgz" -C /tmp logs; }
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a $L/progress.txt; pack; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $L/device.txt 2>&1; cat $L/device.txt
for t in "$here"/*_gpu_test; do
  n=$(basename $t); timeout 60 $t >$L/$n.log 2>&1; rc=$?; el "$n: exit $rc"; [ $rc = 0 ] || tail -5 $L/$n.log
done
timeout 90 "$here/kernels_bench" >$L/kernels_bench.txt 2>&1; el "kernels_bench exit $?"
grep -E "suffix_match|step|graph|tree_build +batch 64 x 64|greedy_verify +batch 1 x 64 nodes, vocab 128256" $L/kernels_bench.txt
timeout 60 "$here/decoder_step_bench" --tokens 128 >$L/decoder_step_bench.txt 2>&1; el "decoder_step_bench exit $?"
san() {  # tool test
  timeout 270 compute-sanitizer --tool $1 --error-exitcode 99 "$here/$2" >$L/$2.$1.log 2>&1; rc=$?
  echo "[$(( $(date +%s) - t0 ))s] $2 $1: exit $rc $(grep -E 'SUMMARY|test cases' $L/$2.$1.log | tr '\n' ' ')" | tee -a $L/progress.txt
}
export -f san; export here L t0
{ for tool in memcheck synccheck racecheck; do echo "$tool kv_compaction_gpu_test"; echo "$tool suffix_match_gpu_test"; done
  for t in backend_batch_step_gpu_test backend_step_gpu_test gpu_dense_search_gpu_test stochastic_verify_gpu_test tree_build_gpu_test; do echo "racecheck $t"; done
} | xargs -P 11 -L 1 bash -c 'san "$0" "$1"'
el done
