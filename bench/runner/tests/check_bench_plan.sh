#!/usr/bin/env bash
# ctest BenchRunner.BenchPlansBeforeReserving: scripts/bench --dry-run (HUGEPAGE_BENCH: this
# build's binary, no build) refuses a --sizes or --paired-size the machine cannot hold, with the
# binary's reason, before any pool is touched; for a size that fits, the pools it would reserve
# leave MemAvailable the memory the run needs. It never writes a pool (the counts are compared).
# Usage: check_bench_plan.sh SCRIPT BENCH
set -uo pipefail
script=$1 bench=$2
pool=/proc/sys/vm/nr_hugepages
before=$(cat "$pool")
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for flags in "--sizes 4M,4T" "--sizes 4M --paired-size 64G --suites StdMap_Lookup"; do
  rc=0
  # shellcheck disable=SC2086  # the flags are words
  HUGEPAGE_BENCH=$bench "$script" --dry-run $flags >"$out" 2>&1 || rc=$?
  if [ "$rc" != 2 ] || ! grep -Eq "^  --(sizes 4 TiB|paired-size 64 GiB): needs ~[0-9]+ MiB, (MemAvailable|the memory cgroup)" "$out" ||
    ! grep -q "nothing was reserved or run" "$out"; then
    echo "FAIL $flags: exit status $rc:"; sed 's/^/    /' "$out"; failed=1
  else
    echo "ok $flags refused: $(grep -E '^  --' "$out" | head -1)"
  fi
done
# 8 GiB: 20 GiB of pool pages wanted (2.5x), more than a machine under 30 GiB has beside the run.
rc=0
HUGEPAGE_BENCH=$bench "$script" --dry-run --sizes 8G --no-paired >"$out" 2>&1 || rc=$?
if [ "$rc" = 2 ] && grep -q "^  --sizes 8 GiB: needs" "$out"; then
  echo "ok --sizes 8G refused here: $(grep '^  --sizes' "$out")"
else
  plan=$(grep -o 'needs ~[0-9]* MiB), paired run none, MemAvailable [0-9]* MiB' "$out")
  need=$(sed 's/needs ~\([0-9]*\).*/\1/' <<<"$plan")
  avail=$(sed 's/.*MemAvailable \([0-9]*\) MiB/\1/' <<<"$plan")
  pages=$(sed -n 's/.*would reserve \([0-9]*\) free 2 MiB pages.*/\1/p' "$out")
  free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)
  if [ "$rc" != 0 ] || [ -z "$need" ] || [ -z "$pages" ] ||
    [ $(((pages - free) * 2 + need)) -gt "$avail" ]; then
    echo "FAIL --sizes 8G: exit status $rc; $pages pages (free now $free) + $need MiB > $avail MiB:"
    sed 's/^/    /' "$out"; failed=1
  else
    echo "ok --sizes 8G: $pages free 2 MiB pages ($free free now) + ~$need MiB of run <= $avail MiB MemAvailable"
  fi
fi
[ "$(cat "$pool")" = "$before" ] || { echo "FAIL: the 2 MiB pool changed: $before -> $(cat "$pool")"; failed=1; }
exit "$failed"
