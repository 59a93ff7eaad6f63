"""ctest BenchRunner.Flags: hugepage_bench reads --sizes as the runner does (size_cases: the same
sizes accepted, the same refused with the same message), refuses empty names in --suites and
--allocators as the runner does, refuses a --cpu that is not a number, and prints the machine facts
the runner's header asks it for (--machine-facts --json), and plans as it runs (--plan --json: the
run's own estimate and words, the memory cgroup's limit read). Usage: python3 -m runner.tests.check_flags path/to/hugepage_bench"""

import io
import json
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
    out += plan_read(bench)
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


def plan(bench, *flags, preexec_fn=None):
    r = subprocess.run([bench, "--plan", "--json", *flags], capture_output=True, text=True,
                       timeout=60, preexec_fn=preexec_fn)
    return json.loads(r.stdout) if r.returncode == 0 else {"exit": r.returncode, "err": r.stderr}


def plan_read(bench):
    """--plan --json: a size past any machine is left out with the run's own words (the run says
    the same when it skips it), one that fits is not; the 1 GiB allocator is left out where the
    machine has no 1 GiB page; a size past the memory cgroup's limit is left out naming it."""
    out = []
    got = plan(bench, "--sizes=4M,4T", "--suites=FlatHashMap_Lookup")
    if "exit" in got:
        return [f"--plan --json: {got}"]
    rows = {r["size"]: r for r in got["sizes"]}
    big, small = rows.get(4 << 40), rows.get(4 << 20)
    if not big or not small or small["left_out"] is not None or \
            not (big["left_out"] or "").startswith(f"needs ~{big['need'] >> 20} MiB, MemAvailable"):
        out.append(f"--plan --sizes=4M,4T: {got['sizes']!r}")
    if big and big["need"] != (4 << 40) + (1 << 40) + (512 << 20):
        out.append(f"--plan: 4 TiB needs {big['need']}, the run asks 1.25x + 512 MiB")
    # The run's own skip line, word for word but MemAvailable, which moves in between.
    r = subprocess.run([bench, "--sizes=4T", "--suites=FlatHashMap_Lookup",
                        "--benchmark_list_tests=true"], capture_output=True, text=True, timeout=60)
    why = plan(bench, "--sizes=4T")["sizes"][0]["left_out"] or ""
    said = re.escape(f"hugepage_bench: skipping size 4096G ({why})")
    said = re.sub(r"MemAvailable\\ [0-9]+\\ MiB", r"MemAvailable [0-9]+ MiB", said)
    if not re.search(said, r.stderr):
        out.append(f"--plan's reason is not the run's: /{said}/ not in {r.stderr.strip()!r}")
    pools = Path("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages")
    if not pools.exists() or pools.read_text().strip() == "0":
        left = plan(bench, "--sizes=4M", "--allocators=std,hugetlb_1g").get("allocators_left_out")
        if not left or left[0]["allocator"] != "hugetlb_1g":
            out.append(f"--plan without 1 GiB pages: allocators_left_out {left!r}")
    r = subprocess.run([bench, "--plan"], capture_output=True, text=True, timeout=60)
    if r.returncode != 2 or "add --json" not in r.stderr:
        out.append(f"--plan without --json: exit {r.returncode} {r.stderr.strip()!r}")
    out += plan_under_cgroup_limit(bench)
    return out


def skipped(why):
    """A part left out on this machine: said; with HUGEPAGE_REQUIRE=1 a problem."""
    print(f"skipped: the plan under a memory cgroup limit ({why})")
    return [f"HUGEPAGE_REQUIRE=1 and {why}"] if os.environ.get("HUGEPAGE_REQUIRE") == "1" else []


def plan_under_cgroup_limit(bench):
    """In a memory cgroup of its own limited to 1 GiB (root, cgroup v1 or v2 with the memory
    controller), --plan leaves out 1 GiB (1.25 GiB + 512 MiB needed) naming the limit's file."""
    mine = [l.split(":", 2) for l in Path("/proc/self/cgroup").read_text().splitlines()]
    v1 = [p for _, c, p in mine if "memory" in c.split(",")]
    base = Path("/sys/fs/cgroup/memory" + v1[0]) if v1 else \
        Path("/sys/fs/cgroup" + next((p for h, c, p in mine if h == "0"), "/"))
    limit_file = "memory.limit_in_bytes" if v1 else "memory.max"
    if os.geteuid() != 0 or not ((base / limit_file).exists() or
                                 (base / "cgroup.subtree_control").exists()):
        return skipped(f"needs root and a memory cgroup at {base}")
    child = base / f"hugepage-bench-plan-{os.getpid()}"
    try:
        child.mkdir()
    except OSError as e:
        return skipped(f"cannot make {child}: {e}")
    try:
        if not (child / limit_file).exists():
            return skipped(f"no {limit_file} in {child}")
        (child / limit_file).write_text(str(1 << 30))
        procs = str(child / "cgroup.procs")
        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        got = plan(bench, "--sizes=1G", preexec_fn=enter)
        why = (got.get("sizes") or [{}])[0].get("left_out") or ""
        cgroup = got.get("memory_cgroup") or {}
        if "the memory cgroup's limit leaves" not in why or limit_file not in why or \
                cgroup.get("limit") != 1 << 30:
            return [f"--plan in a 1 GiB memory cgroup: {got!r}"]
        print(f"ok: the plan in a 1 GiB memory cgroup: {why}")
        return []
    finally:
        child.rmdir()


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
