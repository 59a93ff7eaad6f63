"""ctest BenchRunner.Scenarios: every scenario's quick variant runs in the binary for glibc and
for our rows, reports the counters the runner's scenario tables read, and the runner computes
its verdict from them. It checks that the figures exist, not their values (the machine is shared).
A row the binary skips fails the check, except the fragmented order book of a process without
root, which cannot read page frame numbers and may fail to fragment (it must then say why), and
a pool row the 2 MiB pool is too small for, and a 1 GiB row where the machine has no 1 GiB pages
(each says so). The fork scenario on a pool with no page
left for the copies must FAIL: its children die of SIGBUS, and the row says so.

Usage: python3 -m runner.tests.check_scenarios path/to/hugepage_bench"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from runner import scenarios
from runner.configs import Config
from runner.execute import Run, collect
from runner.registry import load

# Every scenario row reports these (bench/scenario_engine.hpp report_scenario).
COMMON = ["lat_p50_ns", "lat_p99_ns", "lat_p999_ns", "lat_max_ns", "requests_per_s",
          "startup_ms", "peak_rss_mib", "steady_rss_mib", "live_mib", "rss_over_live",
          "huge_pct", "process_huge_pct"]
# ... and these per scenario.
OWN = {"Scenario_ForkSnapshot": ["min_coverage_pct", "recovery_ms_max", "unrecovered_cycles",
                                 "fork_cycles", "children_ok", "unforked_p999_ns",
                                 "p999_over_unforked", "p999_child_alive_over_unforked",
                                 "p999_catch_up_over_unforked", "catch_up_requests",
                                 "p999_no_child_over_unforked"],
       "Scenario_SparseIdle": ["idle_rss_end_mib", "idle_rss_max_mib", "idle_rss_over_live"],
       "Scenario_OrderBook": ["nodes_huge_pct"]}
NOT_FRAGMENTED = "fragment first failed"
POOL_SMALL = "the 2 MiB pool has"
POOL_SHORT = "Scenario_ForkPoolShort"
# Rows with no single container to read the huge share of.
NO_HUGE_PCT = ("Scenario_NodeThreads",)


def vm_counters():
    """The vm_ counters the binary can report here: those /proc/vmstat has."""
    have = {line.split()[0] for line in Path("/proc/vmstat").read_text().splitlines()}
    return ["vm_" + n for n in scenarios.VMSTAT if n in have]


def timeout_of(suite, rows):
    """Seconds a suite's quick run may take: 240, and for a suite that fragments the machine
    first, each row's fragmenter deadline on top (fragment_first in bench/scenario_order_book.cpp:
    12 s a GiB of MemAvailable, at least 120 s). A guest whose memory the host took back faults
    it in slowly: a fixed 240 s stopped such a run here before its rows' deadlines had passed."""
    if "Fragmented" not in suite:
        return 240
    available_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            available_kib = int(line.split()[1])
    return 240 + rows * max(120, 12 * ((available_kib >> 20) + 1))


def check(bench, registry, suite, out_dir):
    allocators = registry.get(suite).allocators
    json_path = out_dir / f"{suite}.json"
    cmd = [str(bench), "--quick", f"--suites={suite}", "--allocators=" + ",".join(allocators),
           f"--benchmark_out={json_path}", "--benchmark_out_format=json"]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=timeout_of(suite, len(allocators)))
    if r.returncode != 0:
        return [f"{suite}: exit status {r.returncode}: {r.stderr.strip()[-400:]}"]
    data = json.loads(json_path.read_text())
    # One configuration reads every row: std is "glibc std", the others "ours <allocator>".
    config = Config("glibc", {}, allocators, None, peer=False)
    cells = collect([Run(1, "glibc", cmd, {}, 0, 0.0, str(json_path), data)], [config], "auto")
    problems = []
    mine = [c for c in cells.values() if c.suite == suite]
    # Without 1 GiB pages (no such pool on this CPU, or its directory hidden) the binary leaves
    # the 1 GiB row out with its reason: no row is expected of it.
    if not Path("/sys/kernel/mm/hugepages/hugepages-1048576kB").is_dir():
        allocators = [a for a in allocators if a != "hugetlb_1g"
                      or any(c.allocator == a for c in mine)]
    if sorted(c.allocator for c in mine) != sorted(allocators):
        problems.append(f"{suite}: rows {sorted(c.allocator for c in mine)}, expected "
                        f"{sorted(allocators)}")
    for c in mine:
        if suite == POOL_SHORT:
            why = c.errors[0] if c.errors else "no error"
            print(f"{suite} {c.label}: {why}")
            if not (why.startswith("FAILED: ") and "killed by SIGBUS" in why
                    or why.startswith(POOL_SMALL)):
                problems.append(f"{suite} {c.label}: expected FAILED with children killed by "
                                f"SIGBUS, got: {why}")
            continue
        if not c.samples:
            why = c.errors[0] if c.errors else "no result"
            if not (suite.endswith("Fragmented") and os.geteuid() != 0 and NOT_FRAGMENTED in why
                    or c.allocator == "hugetlb_2m" and why.startswith(POOL_SMALL)
                    or c.allocator == "hugetlb_1g" and why.startswith("hugetlb pool of 1 GiB")):
                problems.append(f"{suite} {c.label}: skipped: {why}")
            continue
        wanted = COMMON + vm_counters() + OWN.get(suite, [])
        if suite.startswith(NO_HUGE_PCT):
            wanted = [k for k in wanted if k != "huge_pct"]
        if suite == "Scenario_OrderBook" and c.allocator == "std":
            wanted = [k for k in wanted if k != "nodes_huge_pct"]
        missing = [k for k in wanted if k not in c.counters]
        if missing:
            problems.append(f"{suite} {c.label}: no {', '.join(missing)}")
    if suite != POOL_SHORT and any(c.samples for c in mine):
        for ws in sorted({c.ws for c in mine}):
            v = scenarios.verdict(cells, [config], suite, ws, registry)
            print(v["line"])
            if not v["computed"]:
                problems.append(f"{suite}: verdict not computed: {v['line']}")
    return problems


def main(argv):
    bench = Path(argv[0]).resolve()
    registry = load(bench)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for suite in registry.scenarios():
            problems += check(bench, registry, suite, Path(tmp))
    for p in problems:
        print("scenario:", p)
    print(f"{len(registry.scenarios())} scenarios: {', '.join(registry.scenarios())}")
    return 1 if problems or not registry.scenarios() else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main(sys.argv[1:]))
