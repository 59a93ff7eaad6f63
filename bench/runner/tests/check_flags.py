"""ctest BenchRunner.Flags: hugepage_bench reads --sizes as the runner does (size_cases: the same
sizes accepted, the same refused with the same message), refuses empty names in --suites and
--allocators as the runner does, refuses a --cpu that is not a number, and prints the machine facts
the runner's header asks it for (--machine-facts --json). Usage: python3 -m runner.tests.check_flags path/to/hugepage_bench"""

import io
import os
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from runner import cli
from runner.machine import machine_facts
from runner.registry import load as load_registry
from runner.util import parse_size

from . import size_cases


def run(bench, flag):
    """hugepage_bench --list FLAG: it reads every flag before it lists the suites."""
    r = subprocess.run([bench, "--list", flag], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stderr.strip()


def problems(bench):
    out = []

    def expect(flag, code, message=None):
        got, err = run(bench, flag)
        if got != code or (message is not None and err != f"hugepage_bench: {message}"):
            out.append(f"{flag!r}: exit {got} {err!r}, expected exit {code} {message!r}")

    for text in size_cases.ACCEPTED:
        expect(f"--sizes={text}", 0)
    for text in size_cases.REFUSED:
        expect(f"--sizes={text}", 2, f"bad size '{text}' (e.g. 4M, 256MiB, 1.5G, 4096)")
    for text in size_cases.LISTS_ACCEPTED:
        expect(f"--sizes={text}", 0)
    for text, message in size_cases.LISTS_REFUSED.items():
        expect(f"--sizes={text}", 2, message)
    for (flag, text), message in size_cases.NAME_LISTS_REFUSED.items():
        expect(f"{flag}={text}", 2, message)
    for cpu in ("abc", "", "1x", "-1", "1.5", "99999999999", "1024", " 1", "1 ", "+1",
                "\u0661"):
        expect(f"--cpu={cpu}", 2, f"bad --cpu={cpu} (0 to 1023)")
    expect("--cpu=0", 0)
    expect("--cpu=1023", 0)
    out += runner_agrees(bench)
    out += machine_facts_read(bench)
    # The runner's own parser on the same cases, so that one table holds both.
    for text, size in size_cases.ACCEPTED.items():
        if parse_size(text) != size:
            out.append(f"runner: {text!r} is {parse_size(text)}, expected {size}")
    return out


def machine_facts_read(bench):
    """--machine-facts --json as machine.machine_facts() reads it: this kernel, a THP mode the
    library names, pools by page size; --machine-facts alone is a usage error."""
    out = []
    facts = machine_facts(bench)
    if "problem" in facts:
        return [f"--machine-facts --json: {facts['problem']}"]
    if facts.get("kernel") != os.uname().release:
        out.append(f"--machine-facts: kernel {facts.get('kernel')!r}, uname says "
                   f"{os.uname().release!r}")
    if (facts.get("thp") or {}).get("mode") not in ("always", "madvise", "never", None):
        out.append(f"--machine-facts: thp mode {facts['thp'].get('mode')!r}")
    sizes = [p.get("page_bytes") for p in facts.get("pools") or []]
    if sizes != sorted(sizes) or not all(isinstance(b, int) and b > 0 for b in sizes):
        out.append(f"--machine-facts: pools {facts.get('pools')!r}")
    # The 1 GiB gate uses "available": free_hugepages less resv_hugepages, never below 0.
    for pool in facts.get("pools") or []:
        free, reserved = pool.get("free"), pool.get("reserved")
        want_available = max(0, free - reserved) if None not in (free, reserved) else None
        if "available" not in pool or pool["available"] != want_available:
            out.append(f"--machine-facts: pool {pool!r}: available is not free - reserved")
    # The CPU facts the runner gates the 1 GiB configurations on, against /proc/cpuinfo read here.
    flags = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
    want = None if flags is None else "pdpe1gb" in flags.group(1).split()
    if (facts.get("cpu") or {}).get("pdpe1gb") is not want:
        out.append(f"--machine-facts: cpu {facts.get('cpu')!r}, /proc/cpuinfo says pdpe1gb {want}")
    if not set(sizes) <= set(facts.get("pool_sizes") or []):
        out.append(f"--machine-facts: pool_sizes {facts.get('pool_sizes')!r} lack a pool's size")
    r = subprocess.run([bench, "--machine-facts"], capture_output=True, text=True, timeout=60)
    if r.returncode != 2 or "add --json" not in r.stderr:
        out.append(f"--machine-facts without --json: exit {r.returncode} {r.stderr.strip()!r}")
    return out


def runner_says(flag, registry):
    """The runner's exit status and last line of stderr for FLAG (0 and "" when it takes it)."""
    err = io.StringIO()
    try:
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            cli.resolve_suites(cli.parse_args([flag]), registry)
    except SystemExit as e:
        lines = err.getvalue().strip().splitlines()
        return e.code, lines[-1] if lines else ""
    return 0, ""


def runner_agrees(bench):
    """The runner takes and refuses the names and CPUs the binary does, with its words."""
    registry = load_registry(bench)
    a, b = registry.names()[:2]
    out = []
    for flag in (f"--suites={a}", f"--suites=BM_{a}", f"--suites={a},{b}", f"--suites={a}, {b}",
                 "--suites=Nope", f"--suites={a} ", "--allocators=std", "--allocators=THP",
                 "--allocators=std, thp", f"--cpu={min(os.sched_getaffinity(0))}", "--cpu=-1",
                 "--cpu=1024", "--cpu= 1",
                 "--cpu=\u0661", "--cpu=x"):
        code, err = run(bench, flag)
        theirs, said = runner_says(flag, registry)
        message = err.removeprefix("hugepage_bench: ")
        if theirs != code or (code != 0 and not said.endswith(message)):
            out.append(f"runner on {flag!r}: exit {theirs} {said!r}; binary: exit {code} {err!r}")
    return out


def main(argv):
    found = problems(argv[0])
    for p in found:
        print("flags:", p)
    print(f"{len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
