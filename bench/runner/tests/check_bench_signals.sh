#!/usr/bin/env bash
# ctest BenchRunner.SignalStopsTheRunFirst: SIGTERM, SIGINT or SIGHUP to a script that runs the
# runner through run_supervised (scripts/common.sh, as scripts/bench does) stops the runner and
# everything it started before the script's EXIT trap (restore_pools there) runs, and leaves
# nothing running. The "runner" here starts a "benchmark" that ignores SIGTERM and a child that
# outlives it; no pool is touched. Usage: check_bench_signals.sh SCRIPTS_DIR
set -uo pipefail
set -m  # job control: the script under test gets SIGINT (a background job would ignore it)
scripts=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
# running PID: the process exists and has not ended (a zombie waiting for its parent has).
running() { [ -r "/proc/$1/stat" ] && ! awk '{ exit $3 != "Z" }' "/proc/$1/stat" 2>/dev/null; }
export -f running
# The script under test: its EXIT trap writes which of the runner's processes still run then.
cat >"$work/bench.sh" <<'SCRIPT'
set -euo pipefail
source "$1/common.sh"
work=$2
trap 'for f in "$work"/pid.*; do running "$(cat "$f")" && echo "${f##*/}"; done >"$work/alive-at-restore"; echo done >"$work/restored"' EXIT
run_supervised bash -c '
  echo $$ >"$1/pid.runner"
  bash -c "trap \"\" TERM; echo \$\$ >\"$1/pid.benchmark\"; exec sleep 120" &
  (sleep 120 & echo $! >"$1/pid.grandchild"; wait) &
  wait' _ "$work"
SCRIPT
for sig in TERM INT HUP; do
  rm -f "$work"/pid.* "$work/alive-at-restore" "$work/restored"
  HUGEPAGE_STOP_GRACE_S=2 bash "$work/bench.sh" "$scripts" "$work" >"$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    [ -f "$work/pid.benchmark" ] && [ -f "$work/pid.grandchild" ] && break
    sleep 0.1
  done
  kill -"$sig" "$pid"
  start=$SECONDS
  while running "$pid" && [ $((SECONDS - start)) -lt 30 ]; do sleep 0.2; done
  running "$pid" && { echo "FAIL SIG$sig: still running 30 s later"; kill -KILL "$pid"; failed=1; }
  rc=0
  wait "$pid" || rc=$?
  want=$((128 + $(kill -l "$sig")))
  alive=""
  for f in "$work"/pid.*; do running "$(cat "$f")" && alive+="${f##*/} "; done
  if [ ! -f "$work/restored" ]; then
    echo "FAIL SIG$sig: the EXIT trap did not run"; failed=1
  elif [ -s "$work/alive-at-restore" ]; then
    echo "FAIL SIG$sig: still running when the pools were restored: $(tr '\n' ' ' <"$work/alive-at-restore")"
    failed=1
  elif [ -n "$alive" ]; then
    echo "FAIL SIG$sig: still running after the script ended: $alive"; failed=1
  elif [ "$rc" != "$want" ]; then
    echo "FAIL SIG$sig: exit status $rc, not $want"; failed=1
  else
    echo "ok SIG$sig: exit status $rc after $((SECONDS - start)) s, nothing of the run left when the EXIT trap ran"
  fi
  for f in "$work"/pid.*; do kill -KILL "$(cat "$f")" 2>/dev/null; done
done
exit "$failed"
