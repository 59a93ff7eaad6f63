"""The command line: bench/run.py [--quick] [--scenarios] [--thp-always] [--rounds N]
[--sizes 4M,64M,1G] [--suites A,B] [--no-peers | --peers NAMES] [--no-paired] [--out DIR]
[--cpu N] [--bench PATH] [-- extra google-benchmark flags], or bench/run.py --from DIR
[--out NEW] (redo the tables of an earlier run; runs nothing).

Each table cell is the median over the rounds; the spread is min-max over the rounds. Ratios
(speedup over glibc std, ours/peer) are paired per round: the ratio of the two rows measured in
the same round, then the median, min-max and number of those per-round ratios.

Writes into the output directory (default out/bench-<timestamp>/): raw/*.json (the
google-benchmark JSON of every run), logs/*.log (its console output), probes.txt (proof that
each peer was loaded with its options), results.json, results.md and chart.png. Paths inside
them are relative to the output directory.

After each process of the rounds it prints the time elapsed and an estimate of the time left
(progress.py). Before the rounds, `hugepage_bench --headroom` measures what huge pages save a
dependent random chase at the run's working sets (the doctor's probe), for the machine header. After the rounds,
the paired run (`hugepage_bench --paired`: each pairable suite's contenders in one process,
batches alternated round by round) writes raw/paired.json and logs/paired.log; its tables and the
verdict on each of those suites' paired targets are printed and go into results.md.
plan.paired_plan says when a run takes it (by default at 1 GiB, 15 rounds; --quick: 64 MiB, 3).
"""

import argparse
import datetime
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .configs import Config, make_configs, probe
from .execute import Run, read_json, run_once
from .machine import measure_headroom
from .plan import paired_plan, rotation, split_processes, spread_rounds, suites_for_round
from .progress import Progress, fmt_duration, paired_estimate
from .registry import Registry
from .registry import load as load_registry
from .report import paired_report, report
from .sysfs import exit_on_sigterm
from .util import GiB, MiB, fmt_size, log, parse_size, parse_size_list, size_flag

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_BENCH = ROOT / "build" / "bench" / "hugepage_bench"

# The default run (see README-results.md for the time it takes on the 2-core dev VM). The peers
# take part in every round (unless --peer-rounds says otherwise), so that each ours/peer ratio of
# the core suites has one pair per round.
DEFAULT_ROUNDS = 5
DEFAULT_HEAVY_ROUNDS = 2
DEFAULT_MIN_TIME = "0.1"
QUICK_ROUNDS = 2
# A scenario row runs for seconds (tens in a full run) after building GiBs. A full run interleaves
# three rounds (each round every configuration once, in an order rotated per round), so that each
# cell has a median and a min-max to decide on; --quick (CI) one round.
SCENARIO_ROUNDS = 3
SCENARIO_QUICK_ROUNDS = 1


CPU_MAX = 1023  # CPU_SETSIZE - 1, as hugepage_bench bounds --cpu


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
                   help=f"the binary's quick subset, {QUICK_ROUNDS} rounds, peers on the "
                        f"registry's peer core suites only (about a minute)")
    p.add_argument("--scenarios", action="store_true",
                   help="the scenario family only (a service's request loop per configuration: "
                        "latency, RSS, coverage, kernel counters; docs/benchmark.md), with the "
                        "configurations THP always and THP always + fast khugepaged (root); "
                        f"{SCENARIO_ROUNDS} interleaved rounds ({SCENARIO_QUICK_ROUNDS} with "
                        f"--quick) unless --rounds; no paired run, no headroom")
    p.add_argument("--thp-always", action="store_true",
                   help="add the configuration 'thp always': the peers' std rows under plain "
                        "glibc with THP enabled=always machine-wide for that process, then "
                        "restored (root; --scenarios always has it)")
    p.add_argument("--rounds", type=int, help=f"interleaved rounds (default {DEFAULT_ROUNDS})")
    p.add_argument("--heavy-rounds", type=int,
                   help=f"rounds that run every selected suite (default {DEFAULT_HEAVY_ROUNDS}); "
                        f"later rounds run only the registry's core suites "
                        f"(hugepage_bench --list --json)")
    p.add_argument("--peer-rounds", type=int,
                   help="rounds the peers take part in, spread over the run (default: every "
                        "round, so that every ours/peer ratio has a pair in each round)")
    p.add_argument("--min-time", default=DEFAULT_MIN_TIME,
                   help=f"google-benchmark min time per row in seconds (default {DEFAULT_MIN_TIME}: "
                        f"the interleaved rounds give the repetitions; --quick keeps the "
                        f"binary's own)")
    p.add_argument("--sizes", help="working sets, e.g. 4M,64M,1G (default: the binary's list)")
    p.add_argument("--suites", help="suites for our allocators (default: all; hugepage_bench "
                   "--list shows them)")
    p.add_argument("--peer-suites", help="suites for the peers' std rows (default: the "
                   "registry's peer suites)")
    p.add_argument("--allocators", help="our allocators (default: all of the registry's)")
    p.add_argument("--no-peers", action="store_true", help="only our allocators under plain glibc")
    p.add_argument("--peers", metavar="NAMES",
                   help="only these peer configurations, comma-separated, e.g. "
                        "jemalloc,mimalloc (default: all; the run's header lists them)")
    p.add_argument("--out", type=Path, help="output directory (default out/bench-<timestamp>; "
                   "with --from: the --from directory itself)")
    p.add_argument("--cpu", help="pin the benchmark to this CPU (passed as --cpu=N)")
    p.add_argument("--bench", type=Path, default=Path(os.environ.get("HUGEPAGE_BENCH", DEFAULT_BENCH)),
                   help="the benchmark binary (default build/bench/hugepage_bench)")
    p.add_argument("--timeout", type=int, default=900,
                   help="seconds one run of the binary may take before it is killed (default 900)")
    p.add_argument("--from", dest="from_dir", type=Path, metavar="DIR",
                   help="run nothing: redo the tables, results.md/.json and chart.png of an "
                        "earlier output directory from its raw JSON, in that directory or, with "
                        "--out, in a new one (raw/, logs/ and probes.txt are copied there)")
    p.add_argument("--plan", action="store_true",
                   help="run nothing: ask the binary (hugepage_bench --plan --json) which working "
                        "sets of this run fit in MemAvailable and the memory cgroup's limit, say "
                        "why the others do not, and print the largest that fits and its need "
                        "(scripts/bench sizes the pools from it); exit status 2 when a size "
                        "named by --sizes or --paired-size does not fit")
    p.add_argument("--no-paired", action="store_true",
                   help="skip the paired run (hugepage_bench --paired: each pairable suite's "
                        "contenders in one process), which otherwise runs after the rounds unless "
                        "--suites names no pairable suite or --sizes ends below their sizes")
    p.add_argument("--paired-size", metavar="SIZE",
                   help="the paired run's working set (default: the largest of --sizes, else "
                        "1 GiB; --quick 64 MiB)")
    p.add_argument("--paired-rounds", type=int, metavar="N",
                   help="rounds of the paired run (default 15, and more until a minute of rounds "
                        "per row; --quick 3)")
    p.add_argument("--paired-timeout", type=int, default=3600, metavar="S",
                   help="seconds the paired run may take before it is killed (default 3600)")
    p.add_argument("--no-headroom", action="store_true",
                   help="leave the headroom (base vs huge pages, hugepage_bench --headroom) out "
                        "of the machine header")
    p.add_argument("--time", choices=["auto", "real", "cpu"], default="auto",
                   help="time to report: auto (default) = the one google-benchmark iterates on: "
                        "CPU time for lookups (robust to preemption on a small VM), real time "
                        "for the suites that use UseRealTime (build, fault-in, bloat)")
    args = p.parse_args(argv)
    args.extra = extra
    check_numbers(args, p)
    def split(flag, text):
        """The names of a list flag, as hugepage_bench reads them: an empty list or element is an
        error, as for --sizes; a suite may carry google-benchmark's BM_ prefix."""
        if text is None:
            return None
        if text == "":
            p.error(f"{flag}: {flag}= names nothing")
        names = text.split(",")
        if "" in names:
            p.error(f"{flag}: empty name in {flag}={text}")
        if flag != "--allocators":
            names = [n[3:] if n.startswith("BM_") else n for n in names]
        return names
    args.sizes_text = args.sizes.split(",") if args.sizes is not None else None
    if args.cpu is not None:
        args.cpu = parse_cpu(args.cpu, p)
    try:
        args.sizes = parse_size_list(args.sizes) if args.sizes is not None else None
    except argparse.ArgumentTypeError as e:
        p.error(f"--sizes: {e}")
    args.suites = split("--suites", args.suites)
    args.suites_given = args.suites  # before the registry's defaults fill them in
    if args.paired_size is not None:
        try:
            args.paired_size = parse_size(args.paired_size)
        except argparse.ArgumentTypeError as e:
            p.error(f"--paired-size: {e}")
        if not MiB <= args.paired_size <= 64 * GiB:
            p.error(f"--paired-size: {fmt_size(args.paired_size)} is not 1 MiB to 64 GiB")
    if args.paired_rounds is not None and not 1 <= args.paired_rounds <= 1000:
        p.error("--paired-rounds: 1 to 1000")
    args.peer_suites = split("--peer-suites", args.peer_suites)
    if args.peers is not None:
        args.peers = split("--peers", args.peers)
    args.allocators = split("--allocators", args.allocators)
    if args.scenarios:
        args.rounds = args.rounds or (SCENARIO_QUICK_ROUNDS if args.quick else SCENARIO_ROUNDS)
        args.heavy_rounds = args.rounds  # every scenario in every round
        args.no_headroom = True
    given_heavy = args.heavy_rounds if not args.scenarios else None
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS)
    for flag, value in (("--heavy-rounds", given_heavy), ("--peer-rounds", args.peer_rounds)):
        if value is not None and value > args.rounds:
            p.error(f"{flag}: {value} is more than the run's {args.rounds} round(s)")
    if args.heavy_rounds is None:
        args.heavy_rounds = args.rounds if args.quick else min(args.rounds, DEFAULT_HEAVY_ROUNDS)
    if args.peer_rounds is None:
        args.peer_rounds = args.rounds
    args.heavy_round_set = spread_rounds(args.heavy_rounds, args.rounds)
    args.peer_round_set = spread_rounds(args.peer_rounds, args.rounds)
    return args


MAX_ROUNDS = 1000
MAX_MIN_TIME = 3600.0
MAX_TIMEOUT = 7 * 24 * 3600


def check_numbers(args, parser):
    """The numeric flags, each in its range (exit status 2 with the reason otherwise): a count of
    rounds is at least 1 (0 is no default), a subset of rounds at most the rounds, a time a finite
    number of seconds above 0."""
    if args.rounds is not None and not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds: {args.rounds} is not 1 to {MAX_ROUNDS}")
    for flag, value in (("--heavy-rounds", args.heavy_rounds),
                        ("--peer-rounds", args.peer_rounds)):
        if value is not None and not 0 <= value <= MAX_ROUNDS:
            parser.error(f"{flag}: {value} is not 0 to {MAX_ROUNDS}")
    for flag, value in (("--timeout", args.timeout), ("--paired-timeout", args.paired_timeout)):
        if not 1 <= value <= MAX_TIMEOUT:
            parser.error(f"{flag}: {value} is not 1 to {MAX_TIMEOUT} seconds")
    try:
        seconds = float(args.min_time)
    except ValueError:
        seconds = None
    # float() takes "nan", "inf" and "1e9": google-benchmark would then run a row for ever.
    if seconds is None or not math.isfinite(seconds) or not 0 < seconds <= MAX_MIN_TIME:
        parser.error(f"--min-time: '{args.min_time}' is not a number of seconds above 0 and at "
                     f"most {MAX_MIN_TIME:g}")


def parse_cpu(text, parser):
    """--cpu as hugepage_bench reads it: ASCII digits, 0 to CPU_SETSIZE - 1; and one this process
    may run on, which the binary finds out only when it pins itself (every run would fail)."""
    if re.fullmatch(r"[0-9]{1,9}", text) is None or int(text) > CPU_MAX:
        parser.error(f"bad --cpu={text} (0 to {CPU_MAX})")
    allowed = sorted(os.sched_getaffinity(0))
    if int(text) not in allowed:
        parser.error(f"cannot pin to CPU {text}: not one this process may run on "
                     f"({', '.join(map(str, allowed))})")
    return int(text)


def run_kind(config, suites, part):
    """Which processes of the rounds are alike in duration (progress.Progress): the same
    configuration, suites and part."""
    return (config.name, tuple(suites), part)


def usage_error(message):
    """A bad name, said as hugepage_bench says it, with its exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def resolve_suites(args, registry):
    """Fills the defaults that come from the registry, and checks the names given (the messages
    are hugepage_bench's)."""
    known = registry.names()
    for given in (args.suites or []) + (args.peer_suites or []):
        if given not in known:
            usage_error(f"unknown suite '{given}' (hugepage_bench --list shows them)")
    for given in args.allocators or []:
        if given not in registry.allocators:
            usage_error(f"unknown allocator '{given}' ({', '.join(registry.allocators)})")
    if args.scenarios:
        others = [s for s in (args.suites or []) if s not in registry.scenarios()]
        if others:
            usage_error(f"--scenarios runs scenario suites only, not {', '.join(others)} "
                        f"(scenarios: {', '.join(registry.scenarios())})")
        args.suites = args.suites or registry.scenarios()
        args.peer_suites = args.peer_suites or args.suites
    if not args.suites and not args.quick:
        # A default run leaves the scenarios out (they run with --scenarios, or when named).
        args.suites = [s for s in known if s not in registry.scenarios()]
    peer = args.peer_suites or (registry.peer_core() if args.quick else registry.peer_default())
    if args.suites:
        peer = [s for s in peer if s in args.suites] or args.suites
    args.peer_suites = peer
    if args.sizes:
        args.max_size = max(args.sizes)
    else:
        chosen = args.suites or registry.quick()
        args.max_size = max(max(s.quick_sizes if args.quick else s.sizes)
                            for s in registry.suites if s.name in chosen)


def fail(message):
    """An error in a file or directory the user named: said with the path, exit status 1."""
    sys.exit(f"error: {message}")


def read_results(src):
    """results.json of an earlier output directory, checked for what --from reads."""
    if not src.is_dir():
        fail(f"--from {src}: not a directory")
    path = src / "results.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        fail(f"--from {src}: no results.json there (not an output directory of bench/run.py, "
             f"or its run was stopped before the tables)")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"--from {src}: cannot read {path}: {e}")
    try:
        prev = json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"--from {src}: {path} is not valid JSON ({e}): cut short or edited")
    if not isinstance(prev, dict):
        fail(f"--from {src}: {path} is not a JSON object")
    missing = [k for k in ("configs", "runs", "rounds", "date", "wall_s") if k not in prev]
    if missing:
        fail(f"--from {src}: {path} has no {', '.join(missing)} (not written by bench/run.py)")
    return prev


def read_raw(src, record, what):
    """The raw JSON a run of results.json names. A run that wrote none says so in its record and
    keeps its place in the tables; one that did and is now unreadable would drop its rows (the
    glibc baseline, say) without a word: an error naming the file."""
    data, problem = read_json(src / record["json"])
    if problem and not record.get("problem"):
        fail(f"--from {src}: {src / record['json']} ({what}) {problem}: the run wrote it; "
             f"restore the file (raw/ as the run left it)")
    return data


def check_out_dir(path):
    """--out: a directory that exists or can be made, and can be written, before anything runs."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        fail(f"--out {path}: exists and is not a directory")
    except OSError as e:
        fail(f"--out {path}: cannot make the directory: {e.strerror or e}")
    if not path.is_dir():
        fail(f"--out {path}: exists and is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        fail(f"--out {path}: not writable")


def load_previous(args):
    """--from DIR: the configurations and runs of an earlier run, from its results.json and raw/."""
    src = args.from_dir.resolve()
    prev = read_results(src)
    try:
        return previous_run(args, src, prev)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        fail(f"--from {src}: {src / 'results.json'} is not as bench/run.py writes it "
             f"({type(e).__name__}: {e})")


def previous_run(args, src, prev):
    if "registry" in prev:
        registry = Registry.from_json(prev["registry"])
    else:  # written before the registry existed: ask the binary
        registry = load_registry(args.bench)
    configs = []
    for d in prev["configs"]:
        lib = d["env"].get("LD_PRELOAD")
        c = Config(d["name"], d["env"], d["allocators"], d["suites"], d["peer"], note=d["note"],
                   expect_huge=d["peer"], lib=lib, core=d.get("core", []))
        c.verified = d.get("load_probe_ok")
        configs.append(c)
    runs = []
    for r in prev["runs"]:
        data = read_raw(src, r, f"round {r['round']}, {r['config']}")
        runs.append(Run.from_json(r, data))
    args.rounds = prev["rounds"]
    args.prev_paired = prev.get("paired")
    args.headroom = prev.get("headroom")
    args.quick = prev.get("quick", False)
    peers = {c.name for c in configs if c.peer}
    args.peer_round_set = set(prev.get("peer_rounds") or
                              {r.round for r in runs if r.config in peers})
    heavy = set(registry.names()) - set(registry.core())
    args.heavy_round_set = set(prev.get("heavy_rounds") or
                               {r.round for r in runs if any(s in a for a in r.cmd for s in heavy)}
                               or range(1, args.rounds + 1))
    return (src, registry, prev["date"], configs, prev.get("skipped_peers", []), runs,
            prev["wall_s"])


def copy_run_files(src, dst):
    """raw/, logs/ and probes.txt of an output directory into another, so that it stands alone."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("raw", "logs"):
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name, dirs_exist_ok=True)
    if (src / "probes.txt").exists():
        shutil.copy2(src / "probes.txt", dst / "probes.txt")


def paired_step(args, registry, out_dir):
    """The paired run after the rounds: runs it when plan.paired_plan says so, prints its tables
    and verdicts, adds them to results.md and its record to results.json. Returns the exit status
    it adds (1 when it ran and failed)."""
    suites, size, rounds, seconds, why = paired_plan(args, registry)
    if suites is None:
        record = {"skipped": why}
        print(f"\nPaired run: not run ({why})")
    else:
        log(f"paired run: {','.join(suites)} at {fmt_size(size)}, {rounds} round(s), about "
            f"{fmt_duration(paired_estimate(len(suites), size, rounds, seconds))}")
        # Plain glibc: the binary loads the peers itself, with their options.
        config = Config("paired", {}, [], suites, peer=False)
        run = run_once(args, config, 1, out_dir, suites, size=size, paired=(rounds, seconds))
        log(f"paired run done: {run.wall_s:.0f} s")
        record = run.to_json() | {"size": size, "rounds": rounds, "round_seconds": seconds}
        paired_report(args, registry, out_dir, record, run.data)
    save_paired(out_dir, record)
    return 1 if record.get("rc", 0) != 0 or record.get("problem") else 0


def save_paired(out_dir, record):
    results = out_dir / "results.json"
    if results.exists():
        saved = json.loads(results.read_text())
        saved["paired"] = record
        results.write_text(json.dumps(saved, indent=1) + "\n")


def paired_again(args, registry, out_dir):
    """--from DIR: the paired tables again, from DIR's raw JSON where it has the paired run."""
    record = getattr(args, "prev_paired", None)
    if record is None or "json" not in record:
        return
    data = read_raw(out_dir, record, "the paired run")
    save_paired(out_dir, record)
    paired_report(args, registry, out_dir, record, data)


def binary_plan(bench, sizes, paired_suites=None):
    """`bench --plan --json` for `sizes` (with --paired and these suites for the paired run): the
    binary's own estimate of what each needs and why it is left out."""
    cmd = [str(bench), "--plan", "--json", "--sizes=" + ",".join(size_flag(b) for b in sizes)]
    if paired_suites:
        cmd += ["--paired", "--suites=" + ",".join(paired_suites)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise ValueError(f"exit status {r.returncode}: {r.stderr.strip()[-300:]}")
        plan = json.loads(r.stdout)
        for row in plan["sizes"]:
            row["size"], row["need"] = int(row["size"]), int(row["need"])
        return plan
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as e:
        fail(f"{' '.join(cmd)}: no plan ({e})")


def memory_plan(args, registry):
    """--plan: prints "LARGEST NEED PAIRED PAIRED_NEED MEM_AVAILABLE" (bytes; 0 for a step that
    does not run) on stdout, each working set left out with its reason on stderr; exits 2 when a
    size the command line names does not fit."""
    sizes = args.sizes or sorted({b for s in registry.suites
                                  if s.name in (args.suites or registry.quick())
                                  for b in (s.quick_sizes if args.quick else s.sizes)})
    rounds = binary_plan(args.bench, sizes)
    p_suites, p_size, _, _, why = paired_plan(args, registry)
    paired = binary_plan(args.bench, [p_size], p_suites)["sizes"][0] if p_suites else None
    refused = []
    for row, flag in [(r, "--sizes") for r in rounds["sizes"]] + \
            ([(paired, "--paired-size")] if paired else []):
        if row["left_out"]:
            given = args.paired_size if flag == "--paired-size" else args.sizes
            what = f"{'paired run at ' if flag == '--paired-size' else ''}{fmt_size(row['size'])}"
            if given:
                refused.append(f"{flag} {fmt_size(row['size'])}: {row['left_out']}")
            else:
                log(f"plan: {what} left out: {row['left_out']}")
    if refused:
        print("error: the working sets below do not fit this machine; nothing was reserved or "
              "run:\n" + "\n".join(f"  {r}" for r in refused), file=sys.stderr)
        sys.exit(2)
    fits = [r for r in rounds["sizes"] if not r["left_out"]]
    largest = max(fits, key=lambda r: r["size"]) if fits else {"size": 0, "need": 0}
    if paired and paired["left_out"]:
        paired = None
    if not p_suites:
        log(f"plan: no paired run ({why})")
    print(largest["size"], largest["need"], paired["size"] if paired else 0,
          paired["need"] if paired else 0, rounds["mem_available"])
    return 0


def main(argv):
    args = parse_args(argv)
    if args.plan:
        try:
            registry = load_registry(args.bench)
        except RuntimeError as e:
            sys.exit(f"error: {e}")
        resolve_suites(args, registry)
        return memory_plan(args, registry)
    if args.from_dir:
        src, registry, stamp, configs, skipped, runs, wall = load_previous(args)
        out_dir = args.out.resolve() if args.out else src
        check_out_dir(out_dir)
        if out_dir != src:
            copy_run_files(src, out_dir)
        rc = report(args, registry, out_dir, stamp, configs, skipped, runs, wall)
        paired_again(args, registry, out_dir)
        return rc
    exit_on_sigterm()  # machine-wide settings of a configuration are restored on SIGTERM too
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"error: {args.bench} not found or not executable; build it first:\n"
                 f"  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j\n"
                 f"or run scripts/bench, which also installs the packages and reserves the pools")
    try:
        registry = load_registry(args.bench)
    except RuntimeError as e:
        sys.exit(f"error: {e}")
    resolve_suites(args, registry)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = (args.out or ROOT / "out" / f"bench-{stamp}").resolve()
    check_out_dir(out_dir)
    try:
        configs, skipped = make_configs(args, registry)
    except ValueError as e:
        usage_error(str(e))
    if not configs:
        sys.exit("error: no configuration to run:\n"
                 + "\n".join(f"  skipped: {s}" for s in skipped))
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
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
              f"{','.join(c.suites) if c.suites else '(the quick ones)'}")
    for s in skipped:
        print(f"  skipped: {s}")
    suites, size, rounds, _, why = paired_plan(args, registry)
    print(f"  then the paired run: {','.join(suites)} at {fmt_size(size)}, {rounds} round(s)"
          if suites else f"  no paired run ({why})")
    sys.stdout.flush()
    args.headroom = None
    if not args.no_headroom:
        sizes = args.sizes or sorted({b for s in registry.suites
                                      if s.name in (args.suites or registry.quick())
                                      for b in (s.quick_sizes if args.quick else s.sizes)})
        log(f"headroom: base vs huge pages at {', '.join(fmt_size(b) for b in sizes)}")
        args.headroom = measure_headroom(args.bench, sizes, args.cpu)

    # Every process of the rounds, in order, so that the time left can be said after each.
    planned = [(rnd, c, group, part, size)
               for rnd in range(1, args.rounds + 1)
               for c in rotation(configs, rnd)
               for group, part, size in split_processes(suites_for_round(args, c, rnd, registry),
                                                        registry, args)]
    p_suites, p_size, p_rounds, p_seconds, _ = paired_plan(args, registry)
    progress = Progress([run_kind(c, group, part) for _, c, group, part, _ in planned],
                        paired_estimate(len(p_suites), p_size, p_rounds, p_seconds)
                        if p_suites else None)
    runs, stopped, wall = run_rounds(args, planned, out_dir, progress)
    rc = report(args, registry, out_dir, stamp, configs, skipped, runs, wall)
    if stopped:
        print("\nPaired run: not run (stopped by SIGTERM)")
        return max(rc, 1)
    return max(rc, paired_step(args, registry, out_dir))


class Stopped(Exception):
    """SIGTERM (run-large.sh at its budget, a user's kill) during the rounds."""


def _on_sigterm(signum, frame):
    raise Stopped()


def run_rounds(args, planned, out_dir, progress, run=None):
    """Runs the planned processes [(round, config, suites, part, size)] in order, saying after each
    the time left (progress.Progress); returns (runs, stopped, wall seconds). SIGTERM ends it: the
    process running is killed and left out, and the tables are made of the runs that finished.
    `run`: execute.run_once (a test's stand-in)."""
    run = run or run_once
    runs = []
    t_start = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        for i, (rnd, c, group, part, size) in enumerate(planned):
            r = run(args, c, rnd, out_dir, group, part, size)
            runs.append(r)
            progress.finished(run_kind(c, group, part), r.wall_s)
            log(f"round {rnd}/{args.rounds} {c.name:<16} {r.wall_s:6.1f} s"
                + (f" ({part})" if part else "")
                + ("" if r.rc == 0 else f"  (exit status {r.rc})")
                + f"; {progress.line(time.monotonic() - t_start)}")
            if i + 1 == len(planned) or planned[i + 1][0] != rnd:
                log(f"round {rnd}/{args.rounds} done: {time.monotonic() - t_start:.0f} s so far")
    except Stopped:
        log(f"stopped by SIGTERM after {len(runs)} of {len(planned)} runs: the tables have the "
            f"runs that finished")
        return runs, True, time.monotonic() - t_start
    finally:
        signal.signal(signal.SIGTERM, previous)
    return runs, False, time.monotonic() - t_start
