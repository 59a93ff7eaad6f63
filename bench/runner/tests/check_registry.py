"""ctest BenchRunner.Registry: the suite list that hugepage_bench prints is one the runner can
plan a run from. Usage: python3 -m runner.tests.check_registry path/to/hugepage_bench"""

import re
import sys

from runner.registry import load


# Suites whose results are published (README, docs/bench): renaming one breaks the comparison.
PUBLISHED = ["FlatHashMap_Lookup", "FlatHashMap_LookupMiss", "Vector_Gather", "Vector_Chase",
             "FlatHashMap_Build", "FaultIn", "Bloat_Sparse"]


def problems(reg):
    out = [f"published suite {name} is gone" for name in PUBLISHED if reg.get(name) is None]
    names = reg.names()
    if len(set(names)) != len(names):
        out.append(f"duplicate suite names: {names}")
    if [s.order for s in reg.suites] != sorted(s.order for s in reg.suites):
        out.append("suites are not in order")
    for s in reg.suites:
        if not re.fullmatch(r"[A-Z][A-Za-z0-9]*_[A-Z][A-Za-z0-9]*|[A-Z][A-Za-z0-9]*", s.name):
            out.append(f"{s.name}: not a <Container>_<Operation> name")
        if not s.allocators or not set(s.allocators) <= set(reg.allocators):
            out.append(f"{s.name}: allocators {s.allocators} not among {reg.allocators}")
        if not s.sizes or not s.quick_sizes:
            out.append(f"{s.name}: no default sizes")
        if s.table == "tail" and (reg.get(s.tail_of) is None or reg.get(s.tail_of).table != "time"):
            out.append(f"{s.name}: tail_of {s.tail_of!r} is not a suite with a time table")
        if s.table == "scenario" and (s.quick or s.core):
            out.append(f"{s.name}: a scenario runs only when named, never in --quick or the core")
        if s.table not in ("time", "bloat", "tail", "scenario") or \
                s.peers not in ("none", "full", "core"):
            out.append(f"{s.name}: unknown table {s.table!r} or peers {s.peers!r}")
        rows = set(s.allocators) | {c["name"] for c in s.paired}
        if any(c["role"] not in ("baseline", "ours", "peer") for c in s.paired):
            out.append(f"{s.name}: a contender's role is not baseline, ours or peer")
        for t in s.targets:
            if t["paired"] and not s.paired:
                out.append(f"{s.name}: target '{t['claim']}' is judged paired, the suite is not")
            if t["of"] not in rows | {"ours"} or t["over"] not in rows | {"best_peer", ""}:
                out.append(f"{s.name}: target '{t['claim']}' names rows it does not have")
            if t.get("over_suite") and (reg.get(t["over_suite"]) is None or not t["counter"]):
                out.append(f"{s.name}: target '{t['claim']}' is over a suite it cannot read")
            if (t["of"] == "ours") != (t["over"] == "best_peer") or (not t["over"] and
                                                                      not t["counter"]):
                out.append(f"{s.name}: target '{t['claim']}' measures nothing")
    if not reg.quick() or not reg.core() or not reg.chart_suites():
        out.append("no quick, core or chart suite")
    return out


def main(argv):
    reg = load(argv[0])
    found = problems(reg)
    for p in found:
        print("registry:", p)
    print(f"{len(reg.suites)} suites: {', '.join(reg.names())}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
