#!/bin/sh
# output_failure.sh full|closed REGEX PROGRAM ARGS...
# Runs PROGRAM with its standard output on /dev/full (full) or closed (closed); passes when it
# exits non-zero with exactly one line on stderr, matching REGEX (grep -E).
mode=$1 regex=$2
shift 2
if [ "$mode" = full ]; then
  err=$("$@" 2>&1 >/dev/full)
else
  err=$("$@" 2>&1 >&-)
fi
code=$?
lines=$(printf '%s\n' "$err" | wc -l)
if [ "$code" -eq 0 ]; then echo "FAIL: exit code 0 with standard output $mode"; exit 1; fi
if [ "$lines" -ne 1 ]; then echo "FAIL: $lines lines on stderr:"; printf '%s\n' "$err"; exit 1; fi
if ! printf '%s\n' "$err" | grep -Eq -- "$regex"; then echo "FAIL: stderr '$err' does not match '$regex'"; exit 1; fi
echo "ok: exit $code, $err"
