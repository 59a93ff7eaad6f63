"""Running hugepage_bench once per (round, configuration), and collecting the JSON of the runs
into cells: one cell per (suite, row label, working set), its samples one per round.
"""

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field

from . import stats, sysfs
from .configs import clean_env
from .plan import bench_command
from .util import log, parse_size

BASELINE = "glibc std"


@dataclass
class Run:
    round: int
    config: str
    cmd: list            # as run, from the output directory (paths relative to it)
    env: dict
    rc: int
    wall_s: float
    json: str            # raw/<tag>.json, relative to the output directory
    data: dict = field(default=None, repr=False)  # the google-benchmark JSON, None when unreadable
    problem: str = ""    # why there is no data, in words

    def to_json(self):
        return {"round": self.round, "config": self.config, "cmd": self.cmd, "env": self.env,
                "rc": self.rc, "wall_s": self.wall_s, "json": self.json,
                **({"problem": self.problem} if self.problem else {})}

    @classmethod
    def from_json(cls, d, data):
        return cls(d["round"], d["config"], d["cmd"], d["env"], d["rc"], d["wall_s"], d["json"],
                   data, d.get("problem", ""))


def read_json(path):
    """(data, problem): the parsed file, or None and why not in words."""
    if not path.exists():
        return None, "wrote no JSON"
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        return None, f"wrote JSON that cannot be read ({e})"
    if not text.strip():
        return None, "wrote an empty JSON file (it ran no benchmark row)"
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as e:
        return None, f"wrote unreadable JSON ({e})"


def oom_kills(root=""):
    """How many processes the kernel's OOM killer has killed since boot (/proc/vmstat oom_kill:
    the machine's and every memory cgroup's), or None where the file or line is missing."""
    try:
        with open(f"{root}/proc/vmstat") as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == "oom_kill" and value.strip().isdigit():
                    return int(value)
    except OSError:
        pass
    return None


def signal_name(number):
    """A signal's name (SIGBUS), or "signal N" for a number Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_exit(rc, oom_before=None, oom_after=None):
    """A run's exit status in words: a signal by its name, and a SIGKILL while the OOM killer's
    count rose as what it most likely was."""
    if rc >= 0:
        return f"exit status {rc}"
    name = signal_name(-rc)
    if rc == -signal.SIGKILL and oom_before is not None and oom_after is not None \
            and oom_after > oom_before:
        return (f"killed by the kernel's OOM killer (SIGKILL while /proc/vmstat oom_kill rose by "
                f"{oom_after - oom_before}): out of memory, or over the memory cgroup's limit "
                f"(exit status {rc})")
    return f"killed by {name} (exit status {rc})"


def run_once(args, config, rnd, out_dir, suites, part="", size=None, paired=None):
    """Runs one configuration, from out_dir, so that the command names paths relative to it;
    `part` names a suite and working set `size` that run in a process of their own ("" and None
    for the configuration's main run). `paired`: (rounds, round seconds) for the paired run
    (tag "paired", one process after the rounds)."""
    tag = "paired" if paired else \
        f"r{rnd}-{config.name.replace(' ', '_').replace('=', '')}" + (f"-{part}" if part else "")
    json_rel = f"raw/{tag}.json"
    log_path = out_dir / "logs" / f"{tag}.log"
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    # An --out directory used before may hold an earlier run's JSON: never read that one.
    (out_dir / json_rel).unlink(missing_ok=True)
    bench = os.path.relpath(os.path.abspath(args.bench), out_dir)
    if os.sep not in bench:
        bench = os.path.join(".", bench)
    cmd = bench_command(args, config, json_rel, suites, bench=bench, size=size, paired=paired)
    timeout = args.paired_timeout if paired else args.timeout
    t0 = time.monotonic()
    oom_before = oom_kills()
    with open(log_path, "w") as logf:
        logf.write("# env: " + config.env_text() + "\n# cmd: " + shlex.join(cmd) + "\n")
        logf.flush()
        def note(text):
            logf.write(f"# {text}\n")
            logf.flush()
        try:
            # Machine-wide settings of this configuration (THP always): for this process only.
            with sysfs.applied(config.sysfs, note):
                rc = subprocess.run(cmd, env=clean_env(config.env), cwd=out_dir, stdout=logf,
                                    stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
            log(f"{tag}: killed after {timeout} s ({'--paired-timeout' if paired else '--timeout'})")
        except sysfs.SettingError as e:
            rc = 126
            note(str(e))
            log(f"{tag}: not run: {e}")
    wall = time.monotonic() - t0
    how = describe_exit(rc, oom_before, oom_kills() if rc < 0 else None)
    data, problem = read_json(out_dir / json_rel)
    if problem and rc < 0:
        problem = f"{how}; {problem}"
    if problem:
        log(f"{tag}: {problem}; see logs/{tag}.log")
    if rc != 0:
        with open(log_path) as f:
            tail = "".join(f.readlines()[-8:])
        log(f"{tag}: {how}; last lines of logs/{tag}.log:\n{tail}")
    return Run(rnd, config.name, cmd, config.env, rc, round(wall, 2), json_rel, data, problem)


NAME_RE = re.compile(r"^BM_([^/]+)/([^/]+)/(\d+)")
PAIRED = "paired"  # the allocator field of the paired rows: BM_<Suite>/paired/<bytes>


TIME_SCALE = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


KNOWN_FIELDS = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
                "iterations", "real_time", "cpu_time", "time_unit", "family_index",
                "per_family_instance_index", "aggregate_name", "aggregate_unit", "label",
                "error_occurred", "error_message"}


def ended_text(rc):
    """How a run's process ended, from its return code, in words."""
    if rc < 0:
        return f"was killed by {signal_name(-rc)}"
    if rc == 124:
        return "was killed at its time limit"
    return f"exited with status {rc}"


def flag_values(cmd, flag):
    """The comma-separated values of `--flag=` in a command line, or None."""
    for a in cmd:
        if a.startswith(flag + "="):
            return a[len(flag) + 1:].split(",")
    return None


def died_rows(run):
    """[(suite, allocator, ws)] a run named (--suites, --allocators, --sizes) when its process
    died without results: those rows FAILED. [] when the command does not name them all, or when
    the process ended as it should (its rows then say what happened) or was not run (126)."""
    if run.data or run.rc in (0, 126):
        return []
    suites, allocs, sizes = (flag_values(run.cmd, f) for f in ("--suites", "--allocators",
                                                                 "--sizes"))
    if not (suites and allocs and sizes):
        return []
    try:
        ws = [parse_size(x) for x in sizes]
    except (ValueError, argparse.ArgumentTypeError):
        return []
    return [(s, a, w) for s in suites for a in allocs for w in ws]


def collect(runs, configs, time_field):
    """cells[(suite, label, ws)] = {"samples": [per-run dicts], "errors": [...], ...}. A run whose
    process died before it wrote its JSON gives each row it named an error "FAILED: ..."."""
    by_name = {c.name: c for c in configs}
    cells = {}
    for run in runs:
        if not run.data:
            config = by_name.get(run.config)
            for suite, alloc, ws in died_rows(run) if config else []:
                key = (suite, config.row_label(alloc), ws)
                cell = cells.setdefault(key, stats.Cell(suite, key[1], ws, config.name, alloc))
                cell.errors.append(f"FAILED: its process {ended_text(run.rc)} before it wrote "
                                   f"its results (round {run.round}; {run.problem or 'no JSON'})")
            continue
        config = by_name[run.config]
        per_run = {}
        for b in run.data.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration":
                continue
            m = NAME_RE.match(b.get("name", ""))
            if not m:
                continue
            suite, alloc, ws = m.group(1), m.group(2), int(m.group(3))
            if alloc == PAIRED:
                continue  # collect_paired reads them
            key = (suite, config.row_label(alloc), ws)
            cell = cells.setdefault(key, stats.Cell(suite, key[1], ws, config.name, alloc))
            if b.get("error_occurred"):
                cell.errors.append(b.get("error_message", "error"))
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
            cells[key].samples.append({"round": run.round, "ns": statistics.median(times),
                                          "counters": mid[1]})
    for cell in cells.values():
        stats.summarize(cell)
    # Speedup over the baseline, paired per round: baseline_r / row_r, then their median and range.
    for cell in cells.values():
        base = cells.get((cell.suite, BASELINE, cell.ws))
        cell.speedup = stats.ratio_summary(stats.paired_ratios(base, cell)) if base else None
    return cells


# ---- the paired run (hugepage_bench --paired) -----------------------------------------------------

def paired_configs(registry):
    """The contenders of the paired rows as configurations, so that the cells, tables and
    comparisons of the rounds apply: glibc (std), ours <allocator>, and the peers loaded into the
    process (jemalloc, mimalloc)."""
    from .configs import Config
    out = {}
    for suite in registry.suites:
        for c in suite.paired:
            if c["name"] in out:
                continue
            if c["role"] == "peer":
                out[c["name"]] = Config(c["name"], {}, ["std"], None, peer=True,
                                        note="loaded into the process (dlopen), its huge-page "
                                             "options set")
            elif c["name"] == "std":
                out[c["name"]] = Config("glibc", {}, ["std"], None, peer=False, expect_huge=False,
                                        note="glibc malloc (std::allocator)")
            else:
                out[c["name"]] = Config(f"ours {c['name']}", {}, [c["name"]], None, peer=False)
    return out


def left_out(label, names):
    """{contender: why} from a paired row's label ("left out: hugetlb_1g: ...; jemalloc: ...");
    a reason may hold semicolons of its own."""
    prefix = "left out: "
    if not label or not label.startswith(prefix):
        return {}
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    parts = re.split(rf"(?:^{re.escape(prefix)}|; )({alternatives}): ", label)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def collect_paired(data, registry):
    """(cells, configs) of the paired rows of one google-benchmark JSON: a cell per suite,
    contender and working set, its samples the contender's rounds (ns_<name>_r<k>), its counters
    what its build cost (build_ns_<name>, ...). A contender left out, or a failed row, is a cell
    without samples whose error says why."""
    by_token = paired_configs(registry)
    cells = {}
    for b in (data or {}).get("benchmarks", []):
        m = NAME_RE.match(b.get("name", ""))
        if not m or m.group(2) != PAIRED or b.get("run_type", "iteration") != "iteration":
            continue
        suite, ws = m.group(1), int(m.group(3))
        info = registry.get(suite)
        names = [c["name"] for c in info.paired] if info else []
        why = left_out(b.get("label", ""), names)
        for name in names:
            config = by_token[name]
            alloc = config.allocators[0]
            key = (suite, config.row_label(alloc), ws)
            cell = cells.setdefault(key, stats.Cell(suite, key[1], ws, config.name, alloc))
            if b.get("error_occurred"):
                cell.errors.append(b.get("error_message", "error"))
                continue
            rounds = sorted((int(k.rsplit("_r", 1)[1]), v) for k, v in b.items()
                            if k.startswith(f"ns_{name}_r") and k[len(f"ns_{name}_r"):].isdigit())
            if not rounds:
                cell.errors.append(why.get(name, "no counters in the JSON"))
                continue
            facts = {k[:-len(name) - 1]: v for k, v in b.items()
                     if k.endswith("_" + name) and not k.startswith("ns_")
                     and isinstance(v, (int, float)) and not isinstance(v, bool)}
            cell.samples += [{"round": r, "ns": ns, "counters": facts} for r, ns in rounds]
    for cell in cells.values():
        stats.summarize(cell)
    for cell in cells.values():
        base = cells.get((cell.suite, BASELINE, cell.ws))
        cell.speedup = stats.ratio_summary(stats.paired_ratios(base, cell)) if base else None
    return cells, list(by_token.values())
