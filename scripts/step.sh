#!/usr/bin/env bash
# Run one long install step with progress lines: what it is doing when it starts, a "still ..." line every
# STEP_TICK seconds (default 15) while it runs, and how long it took (or that it failed) when it ends.
# pip -q prints nothing for minutes on a fresh machine; this says that something is happening, without pip's own
# hundreds of lines (so `make test` stays quiet on a machine where everything is already installed: the Makefile
# only calls this for a step that has work to do).
#
#   scripts/step.sh "installing respstream and its Python dependencies" pip install -q -e '.[test]'
set -u
label=$1
shift
tick=${STEP_TICK:-15}
echo "==> $label ..."
start=$SECONDS
"$@" &
pid=$!
(
  while sleep "$tick"; do
    echo "    ... still running ($((SECONDS - start)) s)"
  done
) &
ticker=$!
wait "$pid"
code=$?
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
if [ "$code" -eq 0 ]; then
  echo "==> done: $label ($((SECONDS - start)) s)"
else
  echo "==> FAILED ($code): $label ($((SECONDS - start)) s)" >&2
fi
exit "$code"
