#!/bin/sh
# test-transcript.sh SIM REAL: runs the transcript program (transcript.c)
# built against the stand-in (SIM) and against the real libcudnn (REAL); the
# two transcripts must be equal.  Exits 77 (SKIP) when REAL cannot run (no
# real cuDNN on this machine).
set -u
sim=$1
real=$2
out=${TMPDIR:-/tmp}/cudasim-transcript.$$
trap 'rm -f "$out.sim" "$out.real" "$out.err"' EXIT
if [ ! -x "$real" ] || ! "$real" > "$out.real" 2> "$out.err"; then
  echo "SKIP: the real libcudnn cannot run here:"; cat "$out.err" 2>/dev/null
  exit 77
fi
"$sim" > "$out.sim" || { echo "FAIL: the stand-in's transcript program failed"; exit 1; }
if diff -u "$out.real" "$out.sim"; then
  echo "$(wc -l < "$out.real") lines: the stand-in answers as the real cuDNN $(head -n 1 "$out.real")"
  exit 0
fi
echo "FAIL: the stand-in's answers (+) differ from the real cuDNN's (-)"
exit 1
