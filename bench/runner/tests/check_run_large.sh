#!/usr/bin/env bash
# ctest BenchRunner.RunLargeDryRun: run-large.sh refuses a bad size setting before it makes
# anything, and DRY_RUN=1 lists a lane that cannot start here as such, with the binary's reason
# (hugepage_bench --plan): a working set past MemAvailable, hugetlb_1g without 1 GiB pages. Runs
# the script beside this build's binary, as in a bundle. Usage: check_run_large.sh SCRIPT BENCH
set -uo pipefail
script=$1 bench=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$script" "$work/run-large.sh"
ln -s "$(cd "$(dirname "$bench")" && pwd)/$(basename "$bench")" "$work/hugepage_bench"
failed=0
# expect NAME WANT_RC PATTERN [VAR=VALUE...]: run-large.sh OUT with the settings, DRY_RUN=1.
expect() {
  local name=$1 want=$2 pattern=$3 rc=0
  shift 3
  env DRY_RUN=1 THREAD_SUITES="" "$@" "$work/run-large.sh" "$work/out-$name" >"$work/log" 2>&1 || rc=$?
  if [ "$rc" != "$want" ] || ! grep -Eq -- "$pattern" "$work/log"; then
    echo "FAIL $name: exit status $rc (wanted $want), no /$pattern/ in:"
    sed 's/^/    /' "$work/log"
    failed=1
  else
    echo "ok $name: $(grep -E -- "$pattern" "$work/log" | head -1 | cut -c1-160)"
  fi
}
expect bad-size 2 "error: SIZES: bad size '4X'" SIZES="8G 4X"
expect bad-peer-size 2 "error: PEER_SIZES: bad size '16GB'" PEER_SIZES=16GB
[ -e "$work/out-bad-size" ] && { echo "FAIL bad-size: made its output directory"; failed=1; }
expect beyond-memory 0 "cannot start: FareCache-64T .*64 GiB|cannot start: FareCache-64T .*MemAvailable" \
  SIZES=64T SCENARIOS=Scenario_FareCache PEER_SIZES=1K
expect fits 0 "^  1 GiB: FareCache-16M Scenario_FareCache 16M std,hugetlb_2m" \
  SIZES=16M SCENARIOS=Scenario_FareCache PEER_SIZES=1K
free_1g=$(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages 2>/dev/null || echo 0)
if [ "$free_1g" = 0 ]; then
  expect no-1g-pages 0 "cannot start: FareCache-16M .*hugetlb_1g left out: " \
    SIZES=16M SCENARIOS=Scenario_FareCache PEER_SIZES=1K ALLOCATORS=hugetlb_1g
  expect some-1g 0 "^  1 GiB: FareCache-16M .*\(hugetlb_1g left out: " \
    SIZES=16M SCENARIOS=Scenario_FareCache PEER_SIZES=1K ALLOCATORS=std,hugetlb_1g
else
  echo "skipped: the lanes without 1 GiB pages (this machine has $free_1g free)"
fi
exit "$failed"
