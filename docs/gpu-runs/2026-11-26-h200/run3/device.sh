#!/usr/bin/env bash
here="$(cd "$(dirname "$0")" && pwd)"
L=/tmp/logs; mkdir -p $L
export LD_LIBRARY_PATH="$here" PATH="/usr/local/cuda/bin:$PATH"
t0=$(date +%s)
pack() { tar czf "$OUT/logs3.tgz" -C /tmp logs; }
for t in stochastic_verify_gpu_test backend_step_gpu_test backend_batch_step_gpu_test; do
  timeout 30 "$here/$t" >$L/$t.log 2>&1; echo "[$(( $(date +%s) - t0 ))s] $t: exit $? $(tail -2 $L/$t.log | tr '\n' ' ')" | tee -a $L/progress.txt
done
pack
rc() {
  timeout 130 compute-sanitizer --tool racecheck --error-exitcode 99 "$here/stochastic_verify_gpu_test" "$1" >$L/race$2.log 2>&1
  echo "[$(( $(date +%s) - t0 ))s] racecheck '$1': exit $? $(grep -E 'SUMMARY|test cases|All tests' $L/race$2.log | tr '\n' ' ')" | tee -a $L/progress.txt
}
rc "GPU conditional verification equals the host walk bit for bit" 3 &
rc "GPU stochastic verification handles padded and unaligned rows and trees over capacity" 4 &
wait
pack
