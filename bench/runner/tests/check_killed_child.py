"""ctest BenchRunner.KilledChild: a scenario row whose child is killed is FAILED, end to end.

Runs the fork scenario's quick variant for glibc with HUGEPAGE_BENCH_CHILD_SIGNAL set (each child
raises it once it has read the table, before it reports), then reads the JSON as the runner
does: the row must carry the binary's "FAILED: ..." error naming the signal, the runner's table
must show it FAILED with no figure, and its verdict must name it. Without the signal the same row
must be measured (the check would otherwise pass on a row that fails for another reason).

Usage: python3 -m runner.tests.check_killed_child path/to/hugepage_bench"""

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

SUITE = "Scenario_ForkSnapshot"


def run_row(bench, out, signal):
    json_path = out / f"fork-{signal or 'none'}.json"
    cmd = [str(bench), "--quick", f"--suites={SUITE}", "--allocators=std",
           f"--benchmark_out={json_path}", "--benchmark_out_format=json"]
    env = dict(os.environ)
    env.pop("HUGEPAGE_BENCH_CHILD_SIGNAL", None)
    if signal:
        env["HUGEPAGE_BENCH_CHILD_SIGNAL"] = signal
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    if r.returncode != 0:
        raise SystemExit(f"exit status {r.returncode}: {r.stderr.strip()[-400:]}")
    data = json.loads(json_path.read_text())
    config = Config("glibc", {}, ["std"], None, peer=False)
    return collect([Run(1, "glibc", cmd, {}, 0, 0.0, str(json_path), data)], [config], "auto"), \
        config


def main(argv):
    bench = Path(argv[0]).resolve()
    registry = load(bench)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for signal, name in (("BUS", "SIGBUS"), ("KILL", "SIGKILL")):
            cells, config = run_row(bench, Path(tmp), signal)
            (cell,) = [c for c in cells.values() if c.suite == SUITE]
            why = cell.errors[0] if cell.errors else ""
            print(f"{signal}: {why}")
            if cell.samples or not why.startswith("FAILED: ") or f"killed by {name}" not in why:
                problems.append(f"{signal}: expected a FAILED row naming {name}, got samples "
                                f"{len(cell.samples)}, error '{why}'")
                continue
            (_, heads, rows, _), = scenarios.scenario_tables(cells, [config], SUITE, registry)
            if rows[0][-1] != why or set(rows[0][1:heads.index("n")]) != {"-"}:
                problems.append(f"{signal}: the table row is {rows[0]}")
            v = scenarios.verdict(cells, [config], SUITE, cell.ws, registry)
            if "glibc std FAILED: " not in v["line"]:
                problems.append(f"{signal}: the verdict does not name the failed row: {v['line']}")
        cells, _ = run_row(bench, Path(tmp), None)
        (cell,) = [c for c in cells.values() if c.suite == SUITE]
        print(f"no signal: {len(cell.samples)} sample(s), errors {cell.errors}, children_ok "
              f"{cell.counters.get('children_ok')}")
        if not cell.samples or cell.errors or cell.counters.get("children_ok") != \
                cell.counters.get("fork_cycles"):
            problems.append(f"no signal: the row was not measured whole: {cell.errors}")
    for p in problems:
        print("killed child:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main(sys.argv[1:]))
