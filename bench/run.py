#!/usr/bin/python3
"""Runs hugepage_bench under our allocators and under the peers users run today, side by side.

One *configuration* is one way of running the benchmark binary:

  glibc            std rows under plain glibc: the baseline every speedup is measured against
  ours <allocator> one configuration per hugepage allocator (thp, hugetlb_2m, hugetlb_1g,
                   collapse, thp_prefault) under plain glibc, each its own process
  glibc hugetlb=1  std rows, GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (madvise THP on malloc's mmaps)
  glibc hugetlb=2  std rows, GLIBC_TUNABLES=glibc.malloc.hugetlb=2 (MAP_HUGETLB from the 2 MiB pool)
  jemalloc         std rows, Debian's libjemalloc2 (5.3) via LD_PRELOAD, MALLOC_CONF=thp:always,...
  mimalloc         std rows, Debian's libmimalloc2.0 (2.0.x) via LD_PRELOAD, large/huge OS pages

Rounds interleave the configurations (round r runs every configuration once, in an order rotated
by r), so drift of the machine (other tenants, frequency, memory fragmentation) hits all alike.
Each table cell is the median over the rounds; the spread is min-max over the rounds. Ratios
(speedup over glibc std, ours/peer) are paired per round: the ratio of the two rows measured in
the same round, then the median, min-max and number of those per-round ratios.

  bench/run.py [--quick] [--rounds N] [--sizes 4M,64M,1G] [--suites A,B] [--no-peers]
               [--out DIR] [--cpu N] [--bench PATH] [-- extra google-benchmark flags]
  bench/run.py --from DIR [--out NEW]   (redo the tables of an earlier run; runs nothing)

Writes into the output directory (default out/bench-<timestamp>/): raw/*.json (the
google-benchmark JSON of every run), logs/*.log (its console output), probes.txt (proof that
each peer was loaded with its options), results.json, results.md and chart.png.
Python 3 standard library, plus matplotlib for the chart (skipped with a note when missing).
"""

import argparse
import datetime
import glob
import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BENCH = ROOT / "build" / "bench" / "hugepage_bench"

MiB = 1 << 20
GiB = 1 << 30

ALL_SUITES = ["FlatHashMap_Lookup", "FlatHashMap_LookupMiss", "Vector_Gather", "Vector_Chase",
              "FlatHashMap_Build", "FaultIn", "Bloat_Sparse"]
# Suites whose time per iteration is a lookup (or one step of a chase): the speed tables.
LOOKUP_SUITES = ["FlatHashMap_Lookup", "FlatHashMap_LookupMiss", "Vector_Gather", "Vector_Chase"]
CHART_SUITES = ["FlatHashMap_Lookup", "Vector_Chase"]
# Every round runs the core suites (the lookup table and the chart); the other suites run in the
# first --heavy-rounds rounds only. What costs time is building the containers again in every
# process (a 1 GiB map takes seconds to fill), so the budget is spent where the question is.
CORE_SUITES = ["FlatHashMap_Lookup", "Vector_Chase"]
PEER_CORE_SUITES = ["FlatHashMap_Lookup"]
OURS_ALLOCATORS = ["std", "thp", "hugetlb_2m", "hugetlb_1g", "collapse", "thp_prefault"]

# The default run (see README-results.md for the time it takes on the 2-core dev VM). The peers
# take part in every round (unless --peer-rounds says otherwise), so that each ours/peer ratio of
# the core suites has one pair per round.
DEFAULT_ROUNDS = 5
DEFAULT_HEAVY_ROUNDS = 2
DEFAULT_MIN_TIME = "0.1"
DEFAULT_SUITES = ALL_SUITES
DEFAULT_PEER_SUITES = ["FlatHashMap_Lookup", "Vector_Chase", "FaultIn"]
QUICK_ROUNDS = 2
QUICK_PEER_SUITES = ["FlatHashMap_Lookup"]

BASELINE = "glibc std"
# Target of the issue: our best huge-page row no slower than the best peer from this working set up.
TARGET_OURS_OVER_PEER = 1.02
TARGET_MIN_WS = 256 * MiB
# Environment variables that select or tune a malloc: removed before each run, then set per config.
MALLOC_ENV_PREFIXES = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "JE_MALLOC_CONF",
                       "_RJEM_MALLOC_CONF", "MIMALLOC_")

STLB_ENTRIES = (1536, 2048)
# Unit of the time column per suite, and its scale from ns.
SUITE_UNITS = {"FlatHashMap_Lookup": ("ns/lookup", 1.0), "FlatHashMap_LookupMiss": ("ns/lookup", 1.0),
               "Vector_Gather": ("ns/load", 1.0), "Vector_Chase": ("ns/step", 1.0),
               "FlatHashMap_Build": ("ms/build", 1e6), "FaultIn": ("ms/fault-in", 1e6),
               "Bloat_Sparse": ("ms/op", 1e6)}  # second-level TLB entries of recent x86 cores (Zen 2-4, Golden Cove)


# ------------------------------------------------------------------------------------------------
# small helpers


def log(msg):
    print(f"==> {msg}", file=sys.stderr, flush=True)


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 4M, 64M, 1G)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2).upper()]


def fmt_size(n):
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def short_size(n):
    return fmt_size(n).replace(" ", "").replace("iB", "")


def read_text(path, default=""):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def fmt_num(x, digits=3):
    """A number with about `digits` significant digits, '-' for missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


def median(xs):
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return statistics.median(xs) if xs else None


def quartiles(xs):
    if len(xs) < 2:
        return (xs[0], xs[0]) if xs else (None, None)
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def paired_ratios(num, den):
    """[(round, num ns / den ns)] for every round in which both cells were measured: a ratio of
    two rows run side by side, under the same state of the machine."""
    den_ns = {s["round"]: s["ns"] for s in den["samples"]}
    return sorted((s["round"], s["ns"] / den_ns[s["round"]])
                  for s in num["samples"] if den_ns.get(s["round"]))


def ratio_summary(pairs):
    """Median, min, max and n of paired ratios, with the pairs themselves; None without a pair."""
    if not pairs:
        return None
    ratios = [x for _, x in pairs]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "n": len(ratios), "pairs": [{"round": r, "ratio": x} for r, x in pairs]}


def fmt_ratio_range(summary, digits=2):
    """'min-max, n=N' of a ratio_summary."""
    return f"{summary['min']:.{digits}f}-{summary['max']:.{digits}f}, n={summary['n']}"


# ------------------------------------------------------------------------------------------------
# configurations


class Config:
    def __init__(self, name, env, allocators, suites, peer, note="", expect_huge=True, lib=None,
                 core=None):
        self.name = name          # short id, used in file names
        self.env = env            # environment added on top of a malloc-clean environment
        self.allocators = allocators
        self.suites = suites      # None: the binary's default
        self.core = core if core is not None else (PEER_CORE_SUITES if peer else CORE_SUITES)
        self.peer = peer
        self.note = note
        self.expect_huge = expect_huge
        self.lib = lib            # the preloaded .so, if any
        self.verified = None      # result of the load probe

    def row_label(self, allocator):
        if not self.peer:
            return "glibc std" if allocator == "std" else f"ours {allocator}"
        return self.name if allocator == "std" else f"{self.name} {allocator}"

    def env_text(self):
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items()) or "(plain glibc)"


def find_library(soname, package):
    """Path of a shared library: ldconfig's cache first, then the Debian package's file list."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.strip().startswith(soname + " ") and "x86-64" in line or \
                    line.strip().startswith(soname + " ") and "=>" in line:
                path = line.split("=>")[-1].strip()
                if os.path.exists(path):
                    return path
    except OSError:
        pass
    try:
        out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if os.path.basename(line) == soname and os.path.exists(line):
                return line
    except OSError:
        pass
    return None


def hugetlb_free(kb):
    try:
        return int(read_text(f"/sys/kernel/mm/hugepages/hugepages-{kb}kB/free_hugepages", "0"))
    except ValueError:
        return 0


def make_configs(args):
    # One process per allocator, ours as well as the peers': every row starts from a fresh process
    # with the same history (no containers of other rows built before it in the same heap), and the
    # rotation interleaves all of them alike.
    ours_allocs = args.allocators or [a for a in OURS_ALLOCATORS
                                      if not (args.quick and a in ALLOCATOR_SUITES)]
    configs = []
    for alloc in ours_allocs:
        if alloc == "thp_prefault" and "thp" in ours_allocs:
            continue  # measured beside thp, in its process (below)
        if alloc == "std":
            configs.append(Config("glibc", {}, ["std"], args.suites, peer=False, expect_huge=False,
                                  note="std rows = plain glibc malloc (the baseline)"))
        else:
            # thp_prefault shares thp's process: FaultIn is the only suite it has, and a process
            # whose first act is to fault in 1 GiB of THP pays the kernel's compaction for it
            # (seen here: 0.4-0.8 s instead of 0.1 s), which is not what pre-faulting costs.
            allocs = [alloc] + (["thp_prefault"] if alloc == "thp" and "thp_prefault" in ours_allocs
                                else [])
            configs.append(Config(f"ours {alloc}", {}, allocs, args.suites, peer=False,
                                  note=f"hugepage {', '.join(allocs)} under plain glibc"))
    if args.no_peers:
        return configs, []
    skipped = []
    ps = args.peer_suites
    configs.append(Config("glibc hugetlb=1", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, ["std"], ps,
                          peer=True, note="glibc 2.35+: madvise(MADV_HUGEPAGE) on malloc's mmaps"))
    configs.append(Config("glibc hugetlb=2", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2"}, ["std"], ps,
                          peer=True, note="glibc 2.35+: MAP_HUGETLB from the default (2 MiB) pool"))
    je = find_library("libjemalloc.so.2", "libjemalloc2")
    if je:
        # jemalloc 5.3 (Debian 12): opt.thp=always makes every extent madvise(MADV_HUGEPAGE) when
        # the system THP mode is madvise; metadata_thp:auto also puts its metadata on THP once it
        # grows (TUNING.md's suggestion). Names checked against the .so: an unknown name prints
        # "Invalid conf pair", which the probe below treats as a failure.
        configs.append(Config("jemalloc", {"LD_PRELOAD": je,
                                           "MALLOC_CONF": "thp:always,metadata_thp:auto"},
                              ["std"], ps, peer=True, lib=je,
                              note="libjemalloc2 5.3, opt.thp=always + opt.metadata_thp=auto"))
    else:
        skipped.append("jemalloc: libjemalloc.so.2 not found (apt-get install libjemalloc2)")
    mi = find_library("libmimalloc.so.2", "libmimalloc2.0")
    if mi:
        # mimalloc 2.0.x (Debian 12 ships 2.0.9): the option is `large_os_pages`, read from
        # MIMALLOC_LARGE_OS_PAGES. MIMALLOC_ALLOW_LARGE_OS_PAGES is the 2.1+ name: 2.0.x ignores it
        # (that is how the prototype's mimalloc row got no huge pages). With it, mimalloc tries
        # MAP_HUGETLB (2 MiB pool) for its segments and falls back to madvise(MADV_HUGEPAGE).
        # Its docs recommend reserving 1 GiB pages at start-up (MIMALLOC_RESERVE_HUGE_OS_PAGES=N)
        # "whenever possible": we do when the 1 GiB pool has free pages, sized for the largest
        # working set, and keep large OS pages on for whatever does not fit in that arena.
        env = {"LD_PRELOAD": mi, "MIMALLOC_LARGE_OS_PAGES": "1"}
        want_1g = max(1, math.ceil(2 * args.max_size / GiB))
        n_1g = min(want_1g, hugetlb_free(1048576))
        if n_1g > 0:
            env["MIMALLOC_RESERVE_HUGE_OS_PAGES"] = str(n_1g)
        configs.append(Config("mimalloc", env, ["std"], ps, peer=True, lib=mi,
                              note="libmimalloc2.0 2.0.x, large OS pages"
                                   + (f" + {n_1g} reserved 1 GiB page(s)" if n_1g else "")))
    else:
        skipped.append("mimalloc: libmimalloc.so.2 not found (apt-get install libmimalloc2.0)")
    return configs, skipped


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(MALLOC_ENV_PREFIXES)}
    env.update(extra)
    return env


def probe(config):
    """Proves that a peer is loaded with the options it was given. Returns (ok, text)."""
    lines = []
    ok = True
    env = clean_env(config.env)
    if config.lib:
        maps = subprocess.run(["cat", "/proc/self/maps"], env=env, capture_output=True,
                              text=True).stdout
        real = os.path.realpath(config.lib)
        loaded = any(real in line or config.lib in line for line in maps.splitlines())
        lines.append(f"/proc/self/maps of a probe process maps {real}: {'yes' if loaded else 'NO'}")
        ok &= loaded
    if "MALLOC_CONF" in config.env:
        env2 = dict(env, MALLOC_CONF=config.env["MALLOC_CONF"] + ",stats_print:true")
        r = subprocess.run(["true"], env=env2, capture_output=True, text=True)
        opts = [l.strip() for l in r.stderr.splitlines()
                if re.match(r"\s*(Version|opt\.(thp|metadata_thp|retain|background_thread))", l)]
        bad = [l for l in r.stderr.splitlines() if "Invalid conf" in l]
        lines += opts + bad
        ok &= not bad and any('opt.thp: "always"' in l for l in opts)
    if any(k.startswith("MIMALLOC_") for k in config.env):
        env2 = dict(env, MIMALLOC_VERBOSE="1")
        r = subprocess.run(["true"], env=env2, capture_output=True, text=True)
        opts = [l.strip() for l in r.stderr.splitlines()
                if re.search(r"option '(large_os_pages|reserve_huge_os_pages|eager_commit)'", l)
                or "huge" in l.lower() and "option" not in l]
        lines += opts
        ok &= any("'large_os_pages': 1" in l for l in opts)
    if "GLIBC_TUNABLES" in config.env:
        ldso = next((p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1")
                     if os.path.exists(p)), None)
        if ldso:
            r = subprocess.run([ldso, "--list-tunables"], env=env, capture_output=True, text=True)
            t = [l.strip() for l in r.stdout.splitlines() if "malloc.hugetlb" in l]
            lines += t or ["glibc.malloc.hugetlb: not a tunable of this glibc (needs 2.35+)"]
            want = config.env["GLIBC_TUNABLES"].rsplit("=", 1)[-1]
            ok &= any(f": 0x{int(want):x} " in l for l in t)
    return ok, "\n".join("    " + l for l in lines)


# ------------------------------------------------------------------------------------------------
# running


def spread_rounds(n, rounds):
    """n of the rounds 1..rounds, evenly spread (first and last included), so that a subset of
    rounds still sees the drift of the whole run."""
    n = max(0, min(n, rounds))
    if n == 0:
        return set()
    if n == 1:
        return {1}
    return {1 + round(i * (rounds - 1) / (n - 1)) for i in range(n)}


# Suites that run in the first round only: one FlatHashMap_Build row fills maps of every size up
# to 1 GiB (seconds of millions of inserts each, a long measurement on its own), and repeating it
# would push the default run past its 10-minute budget on a 2-core machine.
FIRST_ROUND_ONLY_SUITES = ["FlatHashMap_Build"]

# Allocators that have rows in some suites only (the binary registers nothing else for them).
ALLOCATOR_SUITES = {"thp_prefault": ["FaultIn"]}


def suites_for_round(args, config, rnd):
    """The suites a configuration runs in round rnd: [] = skip the run; None = binary default."""
    if config.peer and rnd not in args.peer_round_set:
        return []
    suites = config.suites or ALL_SUITES
    if rnd not in args.heavy_round_set:
        suites = [s for s in suites if s in config.core]
    if rnd != 1 and not args.quick:
        suites = [s for s in suites if s not in FIRST_ROUND_ONLY_SUITES]
    only = [s for a in config.allocators for s in ALLOCATOR_SUITES.get(a, ALL_SUITES)]
    suites = [s for s in suites if s in only]
    if not suites:
        return []
    return None if not config.suites and suites == ALL_SUITES else suites


def bench_command(args, config, json_path, suites):
    cmd = [str(args.bench)]
    if args.quick:
        cmd.append("--quick")
    if args.sizes:
        cmd.append("--sizes=" + ",".join(args.sizes_text))
    if suites:
        cmd.append("--suites=" + ",".join(suites))
    cmd.append("--allocators=" + ",".join(config.allocators))
    if args.cpu is not None:
        cmd.append(f"--cpu={args.cpu}")
    if not any(a.startswith("--benchmark_repetitions") for a in args.extra):
        cmd.append("--benchmark_repetitions=1")
    if not args.quick and args.min_time and \
            not any(a.startswith("--benchmark_min_time") for a in args.extra):
        cmd.append(f"--benchmark_min_time={args.min_time}")
    cmd += [f"--benchmark_out={json_path}", "--benchmark_out_format=json"]
    cmd += args.extra
    return cmd


def run_once(args, config, rnd, out_dir, suites):
    tag = f"r{rnd}-{config.name.replace(' ', '_').replace('=', '')}"
    json_path = out_dir / "raw" / f"{tag}.json"
    log_path = out_dir / "logs" / f"{tag}.log"
    cmd = bench_command(args, config, json_path, suites)
    t0 = time.monotonic()
    with open(log_path, "w") as logf:
        logf.write("# env: " + config.env_text() + "\n# cmd: " + shlex.join(cmd) + "\n")
        logf.flush()
        try:
            rc = subprocess.run(cmd, env=clean_env(config.env), stdout=logf, stderr=subprocess.STDOUT,
                                timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
            log(f"{tag}: killed after {args.timeout} s (--timeout)")
    wall = time.monotonic() - t0
    data = None
    if json_path.exists():
        try:
            data = json.loads(json_path.read_text())
        except json.JSONDecodeError as e:
            log(f"{tag}: unreadable JSON ({e})")
    if rc != 0:
        tail = "".join(open(log_path).readlines()[-8:])
        log(f"{tag}: exit status {rc}; last lines of {log_path}:\n{tail}")
    return {"round": rnd, "config": config.name, "cmd": cmd, "env": config.env, "rc": rc,
            "wall_s": round(wall, 2), "json": str(json_path.relative_to(out_dir)), "data": data}


NAME_RE = re.compile(r"^BM_([^/]+)/([^/]+)/(\d+)")
TIME_SCALE = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
KNOWN_FIELDS = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
                "iterations", "real_time", "cpu_time", "time_unit", "family_index",
                "per_family_instance_index", "aggregate_name", "aggregate_unit", "label",
                "error_occurred", "error_message"}


def collect(runs, configs, time_field):
    """cells[(suite, label, ws)] = {"samples": [per-run dicts], "errors": [...], ...}."""
    by_name = {c.name: c for c in configs}
    cells = {}
    for run in runs:
        if not run["data"]:
            continue
        config = by_name[run["config"]]
        per_run = {}
        for b in run["data"].get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration":
                continue
            m = NAME_RE.match(b.get("name", ""))
            if not m:
                continue
            suite, alloc, ws = m.group(1), m.group(2), int(m.group(3))
            key = (suite, config.row_label(alloc), ws)
            cell = cells.setdefault(key, {"suite": suite, "label": key[1], "ws": ws,
                                          "config": config.name, "allocator": alloc,
                                          "samples": [], "errors": []})
            if b.get("error_occurred"):
                cell["errors"].append(b.get("error_message", "error"))
                continue
            field = time_field
            if field == "auto":  # the time google-benchmark itself used: real with UseRealTime
                field = "real_time" if "/real_time" in b.get("name", "") else "cpu_time"
            t = b.get(field, b.get("real_time")) * TIME_SCALE.get(b.get("time_unit", "ns"), 1)
            counters = {k: v for k, v in b.items()
                        if k not in KNOWN_FIELDS and isinstance(v, (int, float))}
            counters["label"] = b.get("label", "")
            per_run.setdefault(key, []).append((t, counters))
        # Repetitions inside one run (when passed through): the run's median is its sample.
        for key, reps in per_run.items():
            times = sorted(t for t, _ in reps)
            mid = reps[[t for t, _ in reps].index(statistics.median_low(times))]
            cells[key]["samples"].append({"round": run["round"], "ns": statistics.median(times),
                                          "counters": mid[1]})
    for cell in cells.values():
        ns = [s["ns"] for s in cell["samples"]]
        cell["n"] = len(ns)
        cell["median_ns"] = median(ns)
        cell["min_ns"] = min(ns) if ns else None
        cell["max_ns"] = max(ns) if ns else None
        cell["q1_ns"], cell["q3_ns"] = quartiles(sorted(ns)) if ns else (None, None)
        keys = set()
        for s in cell["samples"]:
            keys |= {k for k, v in s["counters"].items() if isinstance(v, (int, float))}
        cell["counters"] = {k: median([s["counters"].get(k) for s in cell["samples"]
                                       if k in s["counters"]]) for k in sorted(keys)}
        cell["coverage_min"] = min((s["counters"]["coverage_pct"] for s in cell["samples"]
                                    if "coverage_pct" in s["counters"]), default=None)
    # Speedup over the baseline, paired per round: baseline_r / row_r, then their median and range.
    for cell in cells.values():
        base = cells.get((cell["suite"], BASELINE, cell["ws"]))
        cell["speedup"] = ratio_summary(paired_ratios(base, cell)) if base else None
    return cells


def coverage_note(cell, config):
    cov = cell["counters"].get("coverage_pct")
    if cov is None or not config.expect_huge and cell["allocator"] == "std":
        return ""
    if cov < 5:
        return "no huge pages: misconfigured?"
    if cov < 90:
        return "partial huge coverage"
    return ""


# ------------------------------------------------------------------------------------------------
# tables


def text_table(headers, rows, align):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    def line(cells):
        out = []
        for c, w, a in zip(cells, widths, align):
            out.append(str(c).rjust(w) if a == "r" else str(c).ljust(w))
        return "  ".join(out).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def md_table(headers, rows, align):
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---:" if a == "r" else ":---" for a in align) + "|"]
    out += ["| " + " | ".join(str(c) if str(c) else " " for c in r) + " |" for r in rows]
    return "\n".join(out)


def label_order(configs):
    order = []
    for c in configs:
        for a in c.allocators:
            order.append(c.row_label(a))
    return order


def suite_table(cells, configs, suite, rounds):
    """(title, headers, rows, align) for one suite, or None when it has no cells."""
    by_name = {c.name: c for c in configs}
    mine = [c for c in cells.values() if c["suite"] == suite]
    if not mine:
        return None
    order = {l: i for i, l in enumerate(label_order(configs))}
    mine.sort(key=lambda c: (c["ws"], order.get(c["label"], 99), c["label"]))
    has = lambda k: any(k in c["counters"] for c in mine)
    unit, scale = SUITE_UNITS.get(suite, ("ns/op", 1.0))
    num = lambda x: fmt_num(x / scale if x is not None else None)
    headers = ["working set", "configuration", unit, "spread (min-max)", "vs glibc std",
               "vs std min-max", "pairs", "huge %", "peak RSS MiB"]
    align = ["r", "l", "r", "r", "r", "r", "r", "r", "r"]
    extra = []
    if has("bytes_per_second"):
        extra.append(("GB/s", lambda c: fmt_num(c["counters"]["bytes_per_second"] / 1e9)
                      if "bytes_per_second" in c["counters"] else "-"))
    if has("page_walks_per_op"):
        extra.append(("walks/op", lambda c: fmt_num(c["counters"].get("page_walks_per_op"))))
    if has("dtlb_loads_per_op"):
        extra.append(("dTLB loads/op", lambda c: fmt_num(c["counters"].get("dtlb_loads_per_op"))))
    if has("page_faults"):
        extra.append(("faults/op", lambda c: fmt_num(c["counters"].get("page_faults"), 2)))
    headers += [h for h, _ in extra] + ["n", "note"]
    align += ["r"] * len(extra) + ["r", "l"]
    rows = []
    prev_ws = None
    for c in mine:
        ws = fmt_size(c["ws"]) if c["ws"] != prev_ws else ""
        prev_ws = c["ws"]
        config = by_name[c["config"]]
        if not c["samples"]:
            msg = "skipped: " + (c["errors"][0] if c["errors"] else "no result")
            rows.append([ws, c["label"], "-", "-", "-", "-", "0", "-", "-"] + ["-"] * len(extra)
                        + ["0", msg])
            continue
        spread = f"{num(c['min_ns'])}-{num(c['max_ns'])}"
        cov = c["counters"].get("coverage_pct")
        note = coverage_note(c, config)
        if suite == "FaultIn" and config.peer and c["counters"].get("page_faults", 1) < 0.5:
            note = (note + "; " if note else "") + "0 faults: reused memory, not a first touch"
        if c["errors"]:
            note = (note + "; " if note else "") + f"{len(c['errors'])} run(s) failed"
        sp = c["speedup"]
        rows.append([ws, c["label"], num(c["median_ns"]), spread,
                     f"{sp['median']:.2f}x" if sp else "-",
                     f"{sp['min']:.2f}-{sp['max']:.2f}" if sp else "-",
                     str(sp["n"]) if sp else "0",
                     f"{cov:.1f}" if cov is not None else "-",
                     fmt_num(c["counters"].get("peak_rss_mib"))]
                    + [f(c) for _, f in extra] + [str(c["n"]), note])
    title = (f"{suite}: {unit}, median over n interleaved rounds; spread = min-max over rounds; "
             f"vs glibc std = ratios paired per round: median over the rounds where both ran of "
             f"glibc std / row in that round (>1 is faster), their min-max and number of pairs")
    return title, headers, rows, align


def bloat_table(cells, configs):
    mine = [c for c in cells.values() if c["suite"] == "Bloat_Sparse" and c["samples"]]
    if not mine:
        return None
    order = {l: i for i, l in enumerate(label_order(configs))}
    mine.sort(key=lambda c: (c["ws"], order.get(c["label"], 99)))
    headers = ["working set", "configuration", "live KiB", "resident MiB", "resident / live",
               "container MiB", "huge %", "process RSS MiB"]
    align = ["r", "l", "r", "r", "r", "r", "r", "r"]
    rows = []
    prev = None
    for c in mine:
        k = c["counters"]
        live_kib = k.get("live_kib")
        resident = k.get("resident_mib")
        bloat = k.get("bloat_x")
        if bloat is None and live_kib and resident is not None:
            bloat = resident * 1024 / live_kib
        cov = k.get("coverage_pct")
        rows.append([fmt_size(c["ws"]) if c["ws"] != prev else "", c["label"], fmt_num(live_kib),
                     fmt_num(resident), f"{bloat:.0f}x" if bloat is not None else "-",
                     fmt_num(k.get("container_mib")), f"{cov:.1f}" if cov is not None else "-",
                     fmt_num(k.get("rss_mib"))])
        prev = c["ws"]
    title = ("Bloat_Sparse, the other side of the trade: one live 64-byte object per 2 MiB of a big "
             "block; resident vs live bytes (medians over rounds)")
    return title, headers, rows, align


def compare_with_peers(cells, configs, suite):
    """Per working set of a suite: our best huge-page row (highest paired speedup over glibc std)
    against every peer, ours/peer paired per round. The best peer is the one that gives the
    highest median ours/peer. A list of dicts, as saved in results.json."""
    by_name = {c.name: c for c in configs}
    by_paired_speedup = lambda c: (c["speedup"]["median"] if c["speedup"] else 0.0, -c["median_ns"])
    out = []
    for ws in sorted({c["ws"] for c in cells.values() if c["suite"] == suite}):
        row = [c for c in cells.values() if c["suite"] == suite and c["ws"] == ws and c["samples"]]
        ours = [c for c in row if not by_name[c["config"]].peer and c["allocator"] != "std"]
        if not ours:
            continue
        best = max(ours, key=by_paired_speedup)
        peers = [{"peer": p["label"], "peer_median_ns": p["median_ns"],
                  "ours_over_peer": ratio_summary(paired_ratios(best, p))}
                 for p in row if by_name[p["config"]].peer]
        paired = [p for p in peers if p["ours_over_peer"]]
        best_peer = max(paired, key=lambda p: p["ours_over_peer"]["median"], default=None)
        one_g = next((c for c in ours if c["allocator"] == "hugetlb_1g"), None)
        out.append({"suite": suite, "ws": ws, "ours": best["label"],
                    "ours_allocator": best["allocator"], "ours_median_ns": best["median_ns"],
                    "vs_glibc_std": best["speedup"], "peers": peers,
                    "best_peer": best_peer["peer"] if best_peer else None,
                    "hugetlb_1g_median_ns": one_g["median_ns"] if one_g and one_g is not best
                    else None})
    return out


def target_verdict(ratio):
    """The ours/peer target, judged on the paired median, with what the range says about noise."""
    if ratio["median"] <= TARGET_OURS_OVER_PEER:
        return "target met"
    miss = f"target missed by {100 * (ratio['median'] / TARGET_OURS_OVER_PEER - 1):.1f}%"
    if ratio["min"] <= TARGET_OURS_OVER_PEER:
        return miss + ", within the noise (some rounds meet it)"
    return miss + f", above {TARGET_OURS_OVER_PEER} in every round"


def fmt_ours_over_peer(peer):
    """'name median (min-max, n=N)' of one peer's paired ours/peer ratio."""
    r = peer["ours_over_peer"]
    if not r:
        return f"{peer['peer']} (no common round)"
    return f"{peer['peer']} {r['median']:.3f} ({fmt_ratio_range(r, 3)})"


def targets_summary(comparisons, suite="FlatHashMap_Lookup"):
    """Lines comparing our best huge-page row with plain std and with the peers (paired ratios)."""
    lines = []
    for cmp in comparisons:
        text = (f"  {fmt_size(cmp['ws']):>8}: best of ours {cmp['ours_allocator']} "
                f"{fmt_num(cmp['ours_median_ns'])} ns")
        sp = cmp["vs_glibc_std"]
        if sp:
            text += f" = {sp['median']:.2f}x glibc std ({fmt_ratio_range(sp)})"
        best = next((p for p in cmp["peers"] if p["peer"] == cmp["best_peer"]), None)
        if best:
            r = best["ours_over_peer"]
            text += (f"; best peer {best['peer']} {fmt_num(best['peer_median_ns'])} ns, "
                     f"ours/peer = {r['median']:.3f} ({fmt_ratio_range(r, 3)})")
            if cmp["ws"] >= TARGET_MIN_WS:
                text += f": {target_verdict(r)}"
        if cmp["hugetlb_1g_median_ns"] is not None:
            text += f"; 1 GiB pages {fmt_num(cmp['hugetlb_1g_median_ns'])} ns"
        lines.append(text)
        if len(cmp["peers"]) > 1:
            lines.append(f"  {'':>8}  ours/peer for each peer: "
                         + "; ".join(fmt_ours_over_peer(p) for p in cmp["peers"]))
    if not lines:
        return []
    return ["", f"{suite}, summary per working set: ratios paired per round (in each round where both "
                f"ran: ours / peer, glibc std / ours), shown as median (min-max, n = pairs); best peer = "
                f"the one with the highest median ours/peer; target: ours/peer <= "
                f"{TARGET_OURS_OVER_PEER} at >= {fmt_size(TARGET_MIN_WS)}, judged on the median:"] + lines


# ------------------------------------------------------------------------------------------------
# machine


GB_STD_CONTEXT = {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu",
                  "cpu_scaling_enabled", "caches", "load_avg", "library_build_type", "json_schema_version"}


def machine_lines(context, args):
    lines = []
    custom = {k: v for k, v in (context or {}).items()
              if k not in GB_STD_CONTEXT and not k.startswith(MALLOC_ENV_PREFIXES)}
    keys = " ".join(custom).lower()
    # What the runner reads itself, for whatever the benchmark's context does not say.
    own = {}
    if "cpu" not in keys and "model" not in keys:
        cpuinfo = read_text("/proc/cpuinfo")
        m = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
        own["cpu_model"] = m.group(1) if m else platform.processor()
    if "kernel" not in keys:
        own["kernel"] = platform.release()
    if "thp" not in keys:
        own["thp"] = (f"enabled={_bracket(read_text('/sys/kernel/mm/transparent_hugepage/enabled'))} "
                      f"defrag={_bracket(read_text('/sys/kernel/mm/transparent_hugepage/defrag'))}")
    if "pool" not in keys and "hugetlb" not in keys:
        pools = []
        for d in sorted(glob.glob("/sys/kernel/mm/hugepages/hugepages-*kB")):
            kb = int(re.search(r"(\d+)kB", d).group(1))
            pools.append(f"{fmt_size(kb << 10)}: {read_text(d + '/nr_hugepages')} total, "
                         f"{read_text(d + '/free_hugepages')} free")
        own["hugetlb pools"] = "; ".join(pools)
    for k, v in custom.items():
        lines.append(f"  {k}: {v}")
    for k, v in own.items():
        lines.append(f"  {k}: {v}  (read by run.py)")
    if context:
        caches = context.get("caches") or []
        cache_txt = ", ".join(f"L{c.get('level')}{c.get('type', '')[0:1].lower()} "
                              f"{fmt_size(c.get('size', 0))}" for c in caches)
        lines.append(f"  cpus: {context.get('num_cpus')} at {context.get('mhz_per_cpu')} MHz"
                     + (f"; caches: {cache_txt}" if cache_txt else "")
                     + f"; host {context.get('host_name')}; load avg {context.get('load_avg')}")
    return lines


def _bracket(text):
    m = re.search(r"\[(\w[\w+]*)\]", text)
    return m.group(1) if m else text or "?"


# ------------------------------------------------------------------------------------------------
# chart


def draw_chart(cells, configs, path, suites):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    except ImportError:
        return "matplotlib not installed (apt-get install python3-matplotlib): no chart"
    suites = [s for s in suites if any(c["suite"] == s and c["samples"] for c in cells.values())]
    if not suites:
        return "no lookup rows to chart"
    by_name = {c.name: c for c in configs}
    labels = [l for l in label_order(configs)
              if any(c["label"] == l and c["suite"] in suites and c["samples"] for c in cells.values())]
    cmap = plt.get_cmap("tab10")
    colors = {l: cmap(i % 10) for i, l in enumerate(labels)}
    fig, axes = plt.subplots(2, len(suites), figsize=(7.5 * len(suites) + 2.2, 9.5), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]})
    for col, suite in enumerate(suites):
        ax, ax2 = axes[0][col], axes[1][col]
        sizes = sorted({c["ws"] for c in cells.values() if c["suite"] == suite})
        top = 0.0
        for label in labels:
            pts = sorted((c for c in cells.values()
                          if c["suite"] == suite and c["label"] == label and c["samples"]),
                         key=lambda c: c["ws"])
            if not pts:
                continue
            config = by_name[pts[0]["config"]]
            xs = [c["ws"] for c in pts]
            ys = [c["median_ns"] for c in pts]
            # Bars: interquartile range over rounds (min-max is in the tables; one preempted
            # round would otherwise set the scale of the whole panel).
            err = [[max(0.0, c["median_ns"] - c["q1_ns"]) for c in pts],
                   [max(0.0, c["q3_ns"] - c["median_ns"]) for c in pts]]
            top = max([top] + [max(c["q3_ns"], c["median_ns"]) for c in pts])
            nohuge = [coverage_note(c, config).startswith("no huge") for c in pts]
            style = "--" if config.peer else "-"
            lw = 2.6 if label == BASELINE else 1.6
            name = label + ("  (no huge pages!)" if any(nohuge) else "")
            ax.errorbar(xs, ys, yerr=err, label=name, color=colors[label], linestyle=style,
                        linewidth=lw, marker="o" if not config.peer else "s", markersize=4,
                        capsize=3, elinewidth=1)
            sp = [(c["ws"], c["speedup"]["median"]) for c in pts if c["speedup"]]
            if sp and label != BASELINE:
                ax2.plot([x for x, _ in sp], [y for _, y in sp], color=colors[label],
                         linestyle=style, linewidth=1.6, marker="o" if not config.peer else "s",
                         markersize=4)
        lo, hi = min(sizes) / 1.6, max(sizes) * 1.6
        for a in (ax, ax2):
            a.set_xscale("log", base=2)
            a.set_xlim(lo, hi)
            a.xaxis.set_major_locator(FixedLocator(sizes))
            a.xaxis.set_minor_locator(NullLocator())
            a.xaxis.set_major_formatter(FuncFormatter(lambda x, _: short_size(int(round(x)))))
            a.grid(True, which="major", alpha=0.3)
            # STLB reach: entries x page size. 4 KiB pages: 6-8 MiB. 2 MiB pages: 3-4 GiB.
            r4 = (STLB_ENTRIES[0] * 4096, STLB_ENTRIES[1] * 4096)
            r2 = (STLB_ENTRIES[0] * 2 * MiB, STLB_ENTRIES[1] * 2 * MiB)
            a.axvspan(*r4, color="tab:red", alpha=0.15, zorder=0)
            if r2[0] < hi:
                a.axvspan(r2[0], min(r2[1], hi), color="tab:green", alpha=0.12, zorder=0)
        ymax = top * 1.18
        ax.set_ylim(0, ymax)
        ax.text(math.sqrt(r4[0] * r4[1]), ymax * 0.97,
                "STLB reach,\n4 KiB pages\n(1536-2048 x 4 KiB\n= 6-8 MiB)", ha="center", va="top",
                fontsize=8, color="tab:red")
        if r2[0] < hi:
            ax.text(r2[0], ymax * 0.97, "STLB reach,\n2 MiB pages\n(3-4 GiB)", ha="left", va="top",
                    fontsize=8, color="tab:green")
        else:
            ax.text(hi / 1.1, ymax * 0.03, "STLB reach with 2 MiB pages:\n3-4 GiB, beyond this "
                    "axis \u2192", ha="right", va="bottom", fontsize=8, color="tab:green")
        unit = "ns per lookup" if suite.startswith("FlatHashMap") else "ns per step (dependent load)"
        ax.set_title(f"{suite}: {unit} (median; bars = quartiles over rounds)")
        ax.set_ylabel(unit)
        ax2.axhline(1.0, color="black", linewidth=1)
        ax2.set_ylabel("speedup over glibc std (x)")
        ax2.set_xlabel("working set (log scale)")
        ax2.set_title("speedup over plain glibc std: median of per-round ratios (>1 is faster)",
                      fontsize=10)
    # One legend for all panels (same labels, same colours), outside the plots.
    handles, names = [], []
    for a in axes[0]:
        for h, n in zip(*a.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    fig.legend(handles, names, loc="center right", fontsize=9, frameon=False,
               title="configuration", title_fontsize=9)
    fig.suptitle("hugepage: the TLB cliff and how each configuration removes it "
                 "(solid = ours, dashed = peers)", fontsize=12)
    fig.tight_layout(rect=(0, 0, 0.875 if len(suites) > 1 else 0.78, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


# ------------------------------------------------------------------------------------------------
# main


def parse_args(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(
        prog="bench/run.py",
        description="Runs hugepage_bench for our allocators and peer mallocs, interleaved; "
                    "prints the tables, saves raw JSON, results.json/.md and chart.png.",
        epilog="Anything after -- goes to hugepage_bench (google-benchmark flags, e.g. "
               "-- --benchmark_min_time=0.5).")
    p.add_argument("--quick", action="store_true",
                   help=f"the binary's quick subset, {QUICK_ROUNDS} rounds, peers on "
                        f"{','.join(QUICK_PEER_SUITES)} only (about a minute)")
    p.add_argument("--rounds", type=int, help=f"interleaved rounds (default {DEFAULT_ROUNDS})")
    p.add_argument("--heavy-rounds", type=int,
                   help=f"rounds that run every selected suite (default {DEFAULT_HEAVY_ROUNDS}); "
                        f"later rounds run only {','.join(CORE_SUITES)} (peers: "
                        f"{','.join(PEER_CORE_SUITES)})")
    p.add_argument("--peer-rounds", type=int,
                   help="rounds the peers take part in, spread over the run (default: every "
                        "round, so that every ours/peer ratio has a pair in each round)")
    p.add_argument("--min-time", default=DEFAULT_MIN_TIME,
                   help=f"google-benchmark min time per row in seconds (default {DEFAULT_MIN_TIME}: "
                        f"the interleaved rounds give the repetitions; --quick keeps the "
                        f"binary's own)")
    p.add_argument("--sizes", help="working sets, e.g. 4M,64M,1G (default: the binary's list)")
    p.add_argument("--suites", help="suites for our allocators (default: all)")
    p.add_argument("--peer-suites", help="suites for the peers' std rows (default: "
                   f"{','.join(DEFAULT_PEER_SUITES)})")
    p.add_argument("--allocators", help="our allocators (default: " + ",".join(OURS_ALLOCATORS) + ")")
    p.add_argument("--no-peers", action="store_true", help="only our allocators under plain glibc")
    p.add_argument("--out", type=Path, help="output directory (default out/bench-<timestamp>; "
                   "with --from: the --from directory itself)")
    p.add_argument("--cpu", type=int, help="pin the benchmark to this CPU (passed as --cpu=N)")
    p.add_argument("--bench", type=Path, default=Path(os.environ.get("HUGEPAGE_BENCH", DEFAULT_BENCH)),
                   help=f"the benchmark binary (default {DEFAULT_BENCH.relative_to(ROOT)})")
    p.add_argument("--timeout", type=int, default=900,
                   help="seconds one run of the binary may take before it is killed (default 900)")
    p.add_argument("--from", dest="from_dir", type=Path, metavar="DIR",
                   help="run nothing: redo the tables, results.md/.json and chart.png of an "
                        "earlier output directory from its raw JSON, in that directory or, with "
                        "--out, in a new one (raw/, logs/ and probes.txt are copied there)")
    p.add_argument("--time", choices=["auto", "real", "cpu"], default="auto",
                   help="time to report: auto (default) = the one google-benchmark iterates on: "
                        "CPU time for lookups (robust to preemption on a small VM), real time "
                        "for the suites that use UseRealTime (build, fault-in, bloat)")
    args = p.parse_args(argv)
    args.extra = extra
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None
    args.sizes_text = split(args.sizes)
    args.sizes = [parse_size(s) for s in args.sizes_text] if args.sizes_text else None
    args.suites = split(args.suites) or (None if args.quick else DEFAULT_SUITES)
    args.peer_suites = split(args.peer_suites) or (QUICK_PEER_SUITES if args.quick else DEFAULT_PEER_SUITES)
    if args.suites:
        args.peer_suites = [s for s in args.peer_suites if s in args.suites] or args.suites
    args.allocators = split(args.allocators)
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS)
    if args.heavy_rounds is None:
        args.heavy_rounds = args.rounds if args.quick else min(args.rounds, DEFAULT_HEAVY_ROUNDS)
    if args.peer_rounds is None:
        args.peer_rounds = args.rounds
    args.heavy_round_set = spread_rounds(args.heavy_rounds, args.rounds)
    args.peer_round_set = spread_rounds(args.peer_rounds, args.rounds)
    args.max_size = max(args.sizes) if args.sizes else GiB
    return args


def load_previous(args):
    """--from DIR: the configurations and runs of an earlier run, from its results.json and raw/."""
    src = args.from_dir.resolve()
    prev = json.loads((src / "results.json").read_text())
    configs = []
    for d in prev["configs"]:
        lib = d["env"].get("LD_PRELOAD")
        c = Config(d["name"], d["env"], d["allocators"], d["suites"], d["peer"], note=d["note"],
                   expect_huge=d["peer"], lib=lib)
        c.verified = d.get("load_probe_ok")
        configs.append(c)
    runs = []
    for r in prev["runs"]:
        path = src / r["json"]
        r = dict(r)
        r["data"] = json.loads(path.read_text()) if path.exists() else None
        runs.append(r)
    args.rounds = prev["rounds"]
    args.quick = prev.get("quick", False)
    peers = {c.name for c in configs if c.peer}
    args.peer_round_set = set(prev.get("peer_rounds") or
                              {r["round"] for r in runs if r["config"] in peers})
    args.heavy_round_set = set(prev.get("heavy_rounds") or
                               {r["round"] for r in runs
                                if any("FlatHashMap_Build" in a or "FaultIn" in a for a in r["cmd"])}
                               or range(1, args.rounds + 1))
    return src, prev["date"], configs, prev.get("skipped_peers", []), runs, prev["wall_s"]


def copy_run_files(src, dst):
    """raw/, logs/ and probes.txt of an output directory into another, so that it stands alone."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("raw", "logs"):
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name, dirs_exist_ok=True)
    if (src / "probes.txt").exists():
        shutil.copy2(src / "probes.txt", dst / "probes.txt")


def main(argv):
    args = parse_args(argv)
    if args.from_dir:
        src, stamp, configs, skipped, runs, wall = load_previous(args)
        out_dir = args.out.resolve() if args.out else src
        if out_dir != src:
            copy_run_files(src, out_dir)
        return report(args, out_dir, stamp, configs, skipped, runs, wall)
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"error: {args.bench} not found or not executable; build it first:\n"
                 f"  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j\n"
                 f"or run scripts/bench, which also installs the packages and reserves the pools")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = (args.out or ROOT / "out" / f"bench-{stamp}").resolve()
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)

    configs, skipped = make_configs(args)
    probes = []
    for c in configs:
        if c.peer:
            ok, text = probe(c)
            c.verified = ok
            probes.append(f"{c.name}: {'loaded as configured' if ok else 'PROBE FAILED'}\n"
                          f"  env: {c.env_text()}\n{text}")
    (out_dir / "probes.txt").write_text("\n".join(probes) + "\n")

    print(f"hugepage benchmark runner: {len(configs)} configuration(s) x {args.rounds} round(s), "
          f"interleaved; output in {out_dir}")
    for c in configs:
        flag = "" if c.verified in (None, True) else "   <-- load probe FAILED, see probes.txt"
        print(f"  {c.name:<16} {c.env_text()}{flag}")
        print(f"  {'':<16} allocators {','.join(c.allocators)}; suites "
              f"{','.join(c.suites) if c.suites else '(binary default)'}")
    for s in skipped:
        print(f"  skipped peer: {s}")
    sys.stdout.flush()

    runs = []
    t_start = time.monotonic()
    for rnd in range(1, args.rounds + 1):
        k = (rnd - 1) % len(configs)
        for c in configs[k:] + configs[:k]:
            suites = suites_for_round(args, c, rnd)
            if suites == []:
                continue
            run = run_once(args, c, rnd, out_dir, suites)
            runs.append(run)
            log(f"round {rnd}/{args.rounds} {c.name:<16} {run['wall_s']:6.1f} s"
                + ("" if run["rc"] == 0 else f"  (exit status {run['rc']})"))
        log(f"round {rnd}/{args.rounds} done: {time.monotonic() - t_start:.0f} s so far")
    wall = time.monotonic() - t_start
    return report(args, out_dir, stamp, configs, skipped, runs, wall)


def report(args, out_dir, stamp, configs, skipped, runs, wall):
    """Tables on stdout, results.md, results.json and chart.png in out_dir."""
    if not any(r["data"] for r in runs):
        sys.exit(f"error: no run produced JSON; see {out_dir / 'logs'}")

    cells = collect(runs, configs, {"cpu": "cpu_time", "real": "real_time"}.get(args.time, "auto"))

    # Peers: does the context of their runs show the preload? (and did the run see it at all)
    for c in configs:
        if not c.peer or not c.lib:
            continue
        ctxs = [r["data"].get("context", {}) for r in runs if r["config"] == c.name and r["data"]]
        seen = [any(os.path.basename(c.lib) in str(v) for v in ctx.values()) for ctx in ctxs]
        c.context_shows_preload = all(seen) if seen else None

    first = next(r for r in runs if r["data"])
    context = first["data"].get("context", {})
    out = []
    out.append(f"Machine (from the JSON context of {first['json']}):")
    out += machine_lines(context, args)
    out.append(f"Runs: {len(runs)} ({args.rounds} round(s), {len(configs)} configuration(s); "
               f"all suites in rounds {sorted(args.heavy_round_set)}, the core ones in every round; "
               f"peers in rounds {sorted(args.peer_round_set)}), "
               f"wall {wall:.0f} s; each cell = median over rounds, ratios paired per round, "
               f"{'google-benchmark time (CPU for lookups, real for build/fault-in/bloat)' if args.time == 'auto' else args.time + ' time'}.")
    out.append("Configurations:")
    for c in configs:
        extra = ""
        if c.peer:
            extra = "  [load probe: " + ("ok" if c.verified else "FAILED") + \
                    ("" if not c.lib else f"; JSON context shows LD_PRELOAD: "
                     f"{ {True: 'yes', False: 'no', None: '?'}[getattr(c, 'context_shows_preload', None)] }") + "]"
        out.append(f"  {c.name:<16} {c.env_text()}{extra}")
    for s in skipped:
        out.append(f"  skipped: {s}")
    out.append("")

    md = ["# hugepage benchmark results", "", f"Run {stamp}, output directory `{out_dir}`.", "",
          "## Machine", "", "```"] + machine_lines(context, args) + ["```", "", "## Configurations", "",
          "| configuration | environment | allocators | note |", "|:---|:---|:---|:---|"]
    for c in configs:
        md.append(f"| {c.name} | `{c.env_text()}` | {','.join(c.allocators)} | {c.note} |")
    md.append("")

    present = []
    for s in ALL_SUITES + sorted({c["suite"] for c in cells.values()} - set(ALL_SUITES)):
        if s != "Bloat_Sparse" and any(c["suite"] == s for c in cells.values()):
            present.append(s)
    comparisons = {suite: compare_with_peers(cells, configs, suite) for suite in present}
    for suite in present:
        t = suite_table(cells, configs, suite, args.rounds)
        if not t:
            continue
        title, headers, rows, align = t
        out += [title, text_table(headers, rows, align)]
        md += [f"## {suite}", "", title, "", md_table(headers, rows, align), ""]
        if suite == "FlatHashMap_Lookup":
            summ = targets_summary(comparisons[suite], suite)
            out += summ
            md += ["```"] + summ[1:] + ["```", ""] if summ else []
            b = bloat_table(cells, configs)
            if b:
                out += ["", b[0], text_table(*b[1:])]
                md += ["## Bloat_Sparse", "", b[0], "", md_table(*b[1:]), ""]
        out.append("")
    if "FlatHashMap_Lookup" not in present:
        b = bloat_table(cells, configs)
        if b:
            out += [b[0], text_table(*b[1:]), ""]
            md += ["## Bloat_Sparse", "", b[0], "", md_table(*b[1:]), ""]

    chart = out_dir / "chart.png"
    err = draw_chart(cells, configs, chart, CHART_SUITES)
    out.append(f"Chart: {chart}" if err is None else f"Chart: none ({err})")
    md += ["## Chart", "", "![ns per lookup vs working set](chart.png)" if err is None else err, ""]
    out.append(f"Raw google-benchmark JSON: {out_dir / 'raw'}; results: {out_dir / 'results.md'}, "
               f"{out_dir / 'results.json'}; peer load probes: {out_dir / 'probes.txt'}")
    print("\n".join(out))
    (out_dir / "results.md").write_text("\n".join(md) + "\n")

    result = {
        "date": stamp, "wall_s": round(wall, 1), "rounds": args.rounds, "quick": args.quick,
        "heavy_rounds": sorted(args.heavy_round_set), "peer_rounds": sorted(args.peer_round_set),
        "time": args.time, "machine": machine_lines(context, args), "context": context,
        "configs": [{"name": c.name, "env": c.env, "allocators": c.allocators, "suites": c.suites,
                     "peer": c.peer, "note": c.note, "load_probe_ok": c.verified,
                     "context_shows_preload": getattr(c, "context_shows_preload", None)}
                    for c in configs],
        "skipped_peers": skipped,
        "ours_vs_peers": comparisons,
        "runs": [{k: v for k, v in r.items() if k != "data"} for r in runs],
        "cells": [{k: v for k, v in c.items()} | {"note": coverage_note(c, {x.name: x for x in configs}[c["config"]])}
                  for c in sorted(cells.values(), key=lambda c: (c["suite"], c["ws"], c["label"]))],
    }
    (out_dir / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
