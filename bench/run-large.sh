#!/usr/bin/env bash
# run-large.sh [OUT_DIR]: the benchmark on a larger machine, from the bundle that scripts/bundle
# makes (this script sits beside hugepage_bench there). Made for 16 cores, 128 GiB, no PMU, in
# under 8 minutes:
#   - each of $SCENARIOS at each of $SIZES (8, 16 and 32 GiB), glibc and ours ($ALLOCATORS), and
#     the peers in $PEERS at $PEER_SIZES: one lane per (scenario, size), each a bench/run.py of one
#     round, pinned to a CPU of its own. Lanes run side by side, the largest first, while the
#     memory they need (working set times the scenario's factor in $NEED_FACTORS) stays within
#     $MEM_SHARE of MemAvailable; a lane that cannot start here (every size past MemAvailable or
#     the memory cgroup's limit, or every allocator left out, e.g. hugetlb_1g without 1 GiB pages,
#     as hugepage_bench --plan says) is left out with the reason;
#   - $THREAD_SUITES with $THREAD_ALLOCATORS at $THREAD_SIZES in a lane of their own;
#   - nothing runs past $BUDGET_S seconds: a lane still running then is stopped (its directory keeps
#     what finished) and a lane not yet started is left out; the summary says which.
# Each lane writes OUT_DIR/<lane>/ (results.md, results.json, raw/, logs/) and OUT_DIR/<lane>.log;
# OUT_DIR/summary.txt lists the lanes, their exit status and time. Default OUT_DIR:
# ./out-large-<date> beside this script. As root (for the THP and compaction counters the
# scenarios read and for the pools); without a hugetlb pool, ours falls back as the scenarios say.
# docs/benchmark.md, "Larger machines".
set -euo pipefail

# Each setting below can also be given in the environment (SIZES=64M ... for a trial run).
# The scenarios' names as the binary lists them (hugepage_bench --list).
SCENARIOS=${SCENARIOS:-"Scenario_FareCache Scenario_OrderBook"}
SIZES=${SIZES:-"8G 16G 32G"}             # K, M, G or T
ALLOCATORS=${ALLOCATORS:-"std,hugetlb_2m"}   # the scenarios' rows: glibc and ours
PEERS=${PEERS:-"jemalloc,mimalloc"}      # bench/run.py --peers; "all" for all, "none" for none
PEER_SIZES=${PEER_SIZES:-"8G 16G"}       # the sizes the peers run at (32 GiB: glibc and ours)
# No suite of hugepage_bench varies its thread count yet; these are the rows of the thread-safe
# arena (arena_mt: the cost of its locks) beside the single-threaded arena and glibc. Set them to
# the thread-scaling suites when those exist.
THREAD_SUITES=${THREAD_SUITES-"StdMap_Build,StdMap_Churn,NodeHashMap_Churn"}  # "" for none
THREAD_ALLOCATORS=${THREAD_ALLOCATORS:-"std,thp,arena_mt"}
THREAD_SIZES=${THREAD_SIZES:-"1G"}
BUDGET_S=${BUDGET_S:-450}                # everything ends by then (8 minutes less set-up)
# A lane's memory over its working set: the fare cache's table is about its working set; the order
# book wants twice its working set available before it builds (its nodes take 1.5 times).
NEED_FACTORS=${NEED_FACTORS:-"Scenario_FareCache=1.25 Scenario_OrderBook=2"}
NEED_FACTOR=${NEED_FACTOR:-1.5}          # for a suite not in NEED_FACTORS
MEM_SHARE=${MEM_SHARE:-0.9}              # of MemAvailable at the start, for all lanes at once

# Every size setting in need_gib's grammar (a number and K, M, G or T), before anything else.
for setting in SIZES PEER_SIZES THREAD_SIZES; do
  for size in ${!setting}; do
    [[ "$size" =~ ^[0-9]+(\.[0-9]+)?[KMGT]$ ]] ||
      { echo "error: $setting: bad size '$size' (a number and K, M, G or T: 8G, 512M)" >&2; exit 2; }
  done
done
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/out-large-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bench=$here/hugepage_bench
runner=$here/bench/run.py
python=$(command -v python3 || true)
[ -x "$bench" ] || { echo "error: $bench not found: run this from the bundle (scripts/bundle)" >&2; exit 1; }
[ -n "$python" ] || { echo "error: python3 is needed for bench/run.py" >&2; exit 1; }
if LD_LIBRARY_PATH='' ldd "$bench" | grep 'not found' >&2; then
  echo "error: $bench misses the libraries above: the bundle is incomplete" >&2
  exit 1
fi
# Why a lane cannot start here, from the binary's own plan (hugepage_bench --plan: the memory each
# working set needs against MemAvailable and the memory cgroup, the 1 GiB pool for hugetlb_1g):
# "" when it can; otherwise every size or every allocator left out, with the reason. A lane some of
# whose sizes or allocators are left out starts; `lane_notes` says what it leaves out.
lane_plan() {  # suites sizes allocators -> "start|cannot<TAB>notes"
  "$bench" --plan --json --suites="${1// /,}" --sizes="${2// /,}" --allocators="$3" 2>&1 |
    "$python" -c '
import json, sys
text = sys.stdin.read()
try:
    plan = json.loads(text)
except ValueError:
    print("cannot\thugepage_bench --plan failed: " + " ".join(text.split())[:300])
    sys.exit()
sizes = [r for r in plan["sizes"] if r["left_out"]]
notes = ["%s left out: %s" % (fmt, r["left_out"]) for r in sizes
         for fmt in ["%g GiB" % (r["size"] / 2**30)]]
notes += ["%s left out: %s" % (a["allocator"], a["why"]) for a in plan["allocators_left_out"]]
allocs = sys.argv[1].split(",")
gone = {a["allocator"] for a in plan["allocators_left_out"]}
cannot = len(sizes) == len(plan["sizes"]) or all(a in gone for a in allocs)
print(("cannot" if cannot else "start") + "\t" + "; ".join(notes))' "$3"
}
# bench/run.py's peer flags for a lane at SIZE.
peer_flags() {
  case " $PEER_SIZES " in *" $1 "*) ;; *) echo "--no-peers"; return ;; esac
  case "$PEERS" in
    all) ;;
    none) echo "--no-peers" ;;
    *) echo "--peers=$PEERS" ;;
  esac
}

start=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
# GiB of a size (4096K, 512M, 8G, 1T) times the factor of suite $2, rounded up.
need_gib() {
  local f=$NEED_FACTOR pair
  for pair in $NEED_FACTORS; do [ "${pair%%=*}" = "$2" ] && f=${pair#*=}; done
  awk -v s="$1" -v f="$f" 'BEGIN {
    n = s + 0; u = toupper(substr(s, length(s)))
    g = u == "T" ? n * 1024 : u == "G" ? n : u == "M" ? n / 1024 : u == "K" ? n / 1048576 : n / 1073741824
    print int(g * f + 0.999) }'
}
avail_gib=$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)
budget_gib=$(awk -v a="$avail_gib" -v s="$MEM_SHARE" 'BEGIN { print int(a * s) }')
ncpu=$(nproc)

# Lanes: "need_gib name suites sizes allocators peer_flag".
lanes=()
for size in $SIZES; do
  for scenario in $SCENARIOS; do
    lane="$(need_gib "$size" "$scenario") ${scenario#Scenario_}-$size $scenario $size"
    lanes+=("$lane $ALLOCATORS $(peer_flags "$size")")
  done
done
# The largest first, so that the small lanes fill the memory the large ones leave.
mapfile -t lanes < <(printf '%s\n' "${lanes[@]}" | sort -rn -s -k1,1)
if [ -n "$THREAD_SUITES" ]; then
  lane="$(need_gib "${THREAD_SIZES##* }" -) threads $THREAD_SUITES ${THREAD_SIZES// /,}"
  lanes+=("$lane $THREAD_ALLOCATORS --no-peers")
fi

echo "run-large: ${#lanes[@]} lanes on $ncpu CPUs, ${budget_gib} GiB of ${avail_gib} GiB available for" \
  "them, ${BUDGET_S} s budget; output in $out"
# Each lane's verdict, before anything runs: a lane that cannot start is listed with the reason
# and left out of the run.
declare -A verdict_of=() notes_of=()
for lane in "${lanes[@]}"; do
  read -r need name suites sizes allocators peers <<<"$lane"
  IFS=$'\t' read -r verdict notes < <(lane_plan "$suites" "$sizes" "$allocators")
  verdict_of[$name]=$verdict
  notes_of[$name]=$notes
done
if [ -n "${DRY_RUN:-}" ]; then  # DRY_RUN=1: the lanes, in order, and nothing run
  for lane in "${lanes[@]}"; do
    read -r need name rest <<<"$lane"
    if [ "${verdict_of[$name]}" = cannot ]; then
      echo "  cannot start: $name $rest (${notes_of[$name]})"
    else
      echo "  $need GiB: $name $rest${notes_of[$name]:+ (${notes_of[$name]})}"
    fi
  done
  exit 0
fi
declare -A pid_of=() need_of=() began=()
used=0
next_cpu=0
summary=$out/summary.txt
: >"$summary"

start_lane() {  # name suites sizes allocators peer_flag need
  local name=$1 suites=$2 sizes=$3 allocators=$4 peers=$5 need=$6 cpu=$((next_cpu % ncpu))
  next_cpu=$((next_cpu + 1))
  echo "$(date +%T) start $name (cpu $cpu, ~${need} GiB, $(left) s left)"
  timeout --signal=TERM --kill-after=15 "$(left)" "$python" "$runner" --bench "$bench" \
    --suites "${suites// /,}" --sizes "$sizes" --allocators "$allocators" --rounds 1 --no-paired \
    --no-headroom --cpu "$cpu" --out "$out/$name" "$peers" >"$out/$name.log" 2>&1 &
  pid_of[$name]=$!
  need_of[$name]=$need
  began[$name]=$(date +%s)
  used=$((used + need))
}

reap() {  # lanes that ended: their status into the summary
  local name rc
  for name in "${!pid_of[@]}"; do
    if ! kill -0 "${pid_of[$name]}" 2>/dev/null; then
      rc=0
      wait "${pid_of[$name]}" || rc=$?
      local how="exit status $rc"
      [ "$rc" = 124 ] && how="stopped at the budget (exit status 124)"
      printf '%-28s %-40s %5d s\n' "$name" "$how" $(($(date +%s) - began[$name])) >>"$summary"
      echo "$(date +%T) done  $name: $how"
      used=$((used - need_of[$name]))
      unset "pid_of[$name]"
    fi
  done
}

for lane in "${lanes[@]}"; do
  read -r need name suites sizes allocators peers <<<"$lane"
  if [ "${verdict_of[$name]}" = cannot ]; then
    printf '%-28s %s\n' "$name" "left out: cannot start here (${notes_of[$name]})" >>"$summary"
    echo "$(date +%T) skip  $name: cannot start here (${notes_of[$name]})"
    continue
  fi
  while :; do
    reap
    if [ "$(left)" -le 30 ]; then
      printf '%-28s %s\n' "$name" "left out: under 30 s of the budget left" >>"$summary"
      echo "$(date +%T) skip  $name: budget spent"
      break
    fi
    if [ $((used + need)) -le "$budget_gib" ] || [ "${#pid_of[@]}" -eq 0 ]; then
      start_lane "$name" "$suites" "$sizes" "$allocators" "$peers" "$need"
      break
    fi
    sleep 2
  done
done
while [ "${#pid_of[@]}" -gt 0 ]; do
  reap
  sleep 2
done
echo "run-large: $(($(date +%s) - start)) s; $summary:"
cat "$summary"
