"""The paired node-container comparison: arena_bench's BM_Paired_<Container> rows.

arena_bench builds each container once per contender in ONE process (glibc `std`, the arena over
THP `arena`, a pmr pool over THP `pmr`, the arena over 1 GiB pages `arena_1g`, jemalloc and
mimalloc dlopen'ed beside glibc), then alternates batches of lookups and of churn between them,
round after round. Its counters are medians over the rounds and ratios paired per round, so this
module only reads them: one table per container, and a verdict per target of the node arena.

  plan()     whether a run takes the paired step, at which size and for how many rounds
  run()      runs arena_bench into the output directory (raw/paired-nodes.json, logs/)
  report()   the tables and verdicts as text and Markdown (paired-nodes.md)

`bench/run.py --paired-report FILE [--out DIR]` prints the report of an earlier JSON file.
"""

import json
import os
import re
import shlex
import subprocess
import time

from .configs import clean_env
from .tables import md_table, text_table
from .util import GiB, MiB, fmt_num, fmt_size, log

JSON_NAME = "raw/paired-nodes.json"
LOG_NAME = "logs/paired-nodes.log"
MD_NAME = "paired-nodes.md"
BINARY = "arena_bench"

# Contenders in table order (as arena_bench names them in its counters), what each is, and which
# are ours and which are the process-wide peers.
CONTENDERS = {
    "std": "glibc malloc (std::allocator)",
    "pmr": "std::pmr::unsynchronized_pool_resource over hugepage::pmr::thp_resource()",
    "jemalloc": "jemalloc, thp:always,metadata_thp:auto (dlopen'ed, mallocx/sdallocx)",
    "mimalloc": "mimalloc, large OS pages + reserved 1 GiB pages (dlopen'ed, mi_malloc)",
    "arena": "hugepage::arena_allocator over an unsynchronized_arena on THP",
    "arena_1g": "the same arena over 1 GiB hugetlb pages",
}
OURS = ("arena", "arena_1g")
PEERS = ("jemalloc", "mimalloc")
CONTAINERS = {"StdMap": "std::map<u64,u64>", "StdUnorderedMap": "std::unordered_map<u64,u64>",
              "NodeHashMap": "absl::node_hash_map<u64,u64>"}

# The node arena's targets (ratios measured side by side in one run).
LOOKUP_OVER_GLIBC = 1.3        # glibc / arena lookup ns, median of paired rounds, at >= 1 GiB
OURS_OVER_BEST_PEER = 1.00     # best of ours / best peer, median of paired rounds, at >= 1 GiB
# The lookup targets apply from 1 GiB of live bytes. A container of whole nodes falls a few bytes
# short of the size asked for (1 GiB / 48 bytes is not a whole number), hence the 1% slack.
LOOKUP_TARGET_MIN_LIVE = 0.99 * GiB
RSS_OVER_LIVE = 1.10           # plus one huge page per size class
ARENA_PAGE = 2 * MiB           # the arena over THP: one 2 MiB page per size class
# Size classes allowed one spare page: the node's own. (Small bucket arrays early in a hash map's
# growth may take a few more classes; counting only one makes the bound the strictest.)
NODE_CLASSES = 1
COVERAGE = 0.99                # share of the arena's pages on huge pages, at every size

# The default size and rounds: a full run measures at 1 GiB (where the lookup targets apply),
# --quick at 64 MiB so that CI exercises the whole path in about a minute.
DEFAULT_SIZE = GiB
QUICK_SIZE = 64 * MiB
MIN_SIZE = 64 * MiB            # the node suites' smallest working set
DEFAULT_ROUNDS = 15
QUICK_ROUNDS = 3
# A full run goes on past its rounds until a minute of rounds per container: a paired lookup ratio
# near 1.00 moves by about 5% from round to round here, so its median needs many rounds to settle
# (the hash maps' rounds take a fifth of a second, std::map's about three).
DEFAULT_ROUND_SECONDS = 60
NODE_FAMILY = "node containers"

NAME_RE = re.compile(r"^BM_Paired_([A-Za-z0-9]+)/(\d+)")


# ---- which run takes the paired step ------------------------------------------------------------

def plan(args, registry):
    """(size in bytes, rounds, "") when this run takes the paired step, or (None, None, why not).

    The rule: a run takes it unless --no-paired, or --suites names no node-container suite, or
    --sizes tops out below 64 MiB. Its size: --paired-size, else the largest of --sizes, else
    1 GiB (--quick: 64 MiB). Its rounds: --paired-rounds, else 15 (--quick: 3)."""
    rounds = args.paired_rounds or (QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS)
    if args.no_paired:
        return None, None, "--no-paired"
    if args.paired_size:
        return args.paired_size, rounds, ""
    if args.suites_given and registry is not None:
        nodes = set(registry.names(lambda s: s.family == NODE_FAMILY))
        if not nodes & set(args.suites_given):
            return None, None, "--suites names no node-container suite"
    if args.sizes:
        largest = max(args.sizes)
        if largest < MIN_SIZE:
            return None, None, (f"--sizes ends at {fmt_size(largest)}, below the node "
                                f"comparison's smallest size ({fmt_size(MIN_SIZE)})")
        return largest, rounds, ""
    return (QUICK_SIZE if args.quick else DEFAULT_SIZE), rounds, ""


def size_flag(n):
    """A byte count as arena_bench's --sizes takes it: 1G, 64M, 512K."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def command(binary, size, rounds, round_seconds=0):
    """arena_bench's command line, paths relative to the output directory it runs from."""
    timed = [f"--round-seconds={round_seconds}"] if round_seconds else []
    return [binary, f"--sizes={size_flag(size)}", f"--rounds={rounds}", *timed,
            "--benchmark_filter=^BM_Paired_", f"--benchmark_out={JSON_NAME}",
            "--benchmark_out_format=json"]


def run(args, out_dir, size, rounds):
    """Runs arena_bench from out_dir. A dict for results.json: the command, exit status, wall
    time, and `problem` in words when no JSON came back."""
    binary = os.path.relpath(os.path.abspath(args.paired_bench), out_dir)
    if os.sep not in binary:
        binary = os.path.join(".", binary)
    cmd = command(binary, size, rounds, 0 if args.quick else DEFAULT_ROUND_SECONDS)
    (out_dir / "raw").mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    # An --out directory used before may hold an earlier run's JSON: never report that one.
    (out_dir / JSON_NAME).unlink(missing_ok=True)
    # Plain glibc: arena_bench loads the peers itself and sets their options; a malloc variable
    # of the caller's would change what it measures.
    env = clean_env({})
    pin = None
    if args.cpu is not None:
        def pin():
            os.sched_setaffinity(0, {args.cpu})
    t0 = time.monotonic()
    with open(out_dir / LOG_NAME, "w") as logf:
        logf.write(f"# cmd: {shlex.join(cmd)}\n"
                   + (f"# pinned to CPU {args.cpu} (--cpu)\n" if args.cpu is not None else ""))
        logf.flush()
        try:
            rc = subprocess.run(cmd, env=env, cwd=out_dir, stdout=logf, stderr=subprocess.STDOUT,
                                timeout=args.paired_timeout, preexec_fn=pin).returncode
        except subprocess.TimeoutExpired:
            rc = 124
            log(f"paired nodes: killed after {args.paired_timeout} s (--paired-timeout)")
    wall = time.monotonic() - t0
    result = {"cmd": cmd, "rc": rc, "wall_s": round(wall, 1), "size": size, "rounds": rounds,
              "json": JSON_NAME, "log": LOG_NAME}
    data, problem = read(out_dir / JSON_NAME)
    if problem:
        result["problem"] = problem
    if rc != 0:
        with open(out_dir / LOG_NAME) as f:
            tail = "".join(f.readlines()[-8:])
        log(f"paired nodes: exit status {rc}; last lines of {LOG_NAME}:\n{tail}")
    return result


def read(path):
    """(data, problem): arena_bench's JSON, or None and why not in words."""
    if not path.exists():
        return None, f"{path} does not exist"
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        return None, f"{path} is unreadable JSON ({e})"
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        return None, f"{path} has no google-benchmark rows"
    return data, ""


# ---- reading the rows -------------------------------------------------------------------------

def left_out(label):
    """{contender: why} from a row's label ("left out: arena_1g: ...; jemalloc: ...")."""
    if not label or not label.startswith("left out: "):
        return {}
    names = "|".join(sorted(CONTENDERS, key=len, reverse=True))
    parts = re.split(rf"(?:^left out: |; )({names}): ", label)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def rows(data):
    """One dict per BM_Paired row: container, elements, counters, left_out, error."""
    out = []
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        m = NAME_RE.match(b.get("name", ""))
        if not m:
            continue
        counters = {k: v for k, v in b.items() if isinstance(v, (int, float))
                    and not isinstance(v, bool)}
        out.append({"container": m.group(1), "elements": int(m.group(2)), "counters": counters,
                    "left_out": left_out(b.get("label", "")),
                    "error": b.get("error_message", "error") if b.get("error_occurred") else ""})
    return out


def contenders(row):
    """The contenders this row measured, in table order."""
    return [c for c in CONTENDERS if f"lookup_ns_{c}" in row["counters"]]


def ratio(row, key):
    """{"median", "min", "max"} of a paired counter (min/max None where not reported), or None."""
    k = row["counters"]
    if key not in k:
        return None
    return {"median": k[key], "min": k.get(key + "_min"), "max": k.get(key + "_max")}


def fmt_ratio(r, digits=2):
    """'1.37 (1.31-1.47)'; '-' for None."""
    if r is None:
        return "-"
    text = f"{r['median']:.{digits}f}"
    if r["min"] is not None and r["max"] is not None:
        text += f" ({r['min']:.{digits}f}-{r['max']:.{digits}f})"
    return text


def why_missing(row, who):
    """Why a contender has no numbers in this row, in words."""
    if row["error"]:
        return row["error"]
    return row["left_out"].get(who, "no counters in the JSON")


def best_of_ours_over_best_peer(row):
    """(ours, peer, ratio): for each of ours, its best peer is the one with the highest median of
    the paired ours/peer (the peer it does worst against); best of ours is the one whose ratio to
    its best peer is lowest. None when no pair of ours and a peer was measured."""
    options = []
    for ours in OURS:
        against = [(peer, ratio(row, f"lookup_{ours}_over_{peer}")) for peer in PEERS]
        against = [(p, r) for p, r in against if r is not None]
        if against:
            peer, r = max(against, key=lambda x: x[1]["median"])
            options.append((ours, peer, r))
    return min(options, key=lambda x: x[2]["median"]) if options else None


# ---- verdicts ---------------------------------------------------------------------------------

MET, MISSED, NOT_MEASURED, NOT_JUDGED = "met", "missed", "not measured", "not judged"


def combine(parts):
    """One status over several checks: missed if any missed, else not measured if any could not be
    measured, else met. A missing contender never passes."""
    statuses = [s for s, _ in parts]
    for s in (MISSED, NOT_MEASURED, NOT_JUDGED):
        if s in statuses:
            return s
    return MET


def no_slower(row, phase, unit):
    """The build or churn target: the arena no slower than glibc and than the pmr pool."""
    k = row["counters"]
    parts = []
    if f"{phase}_ns_arena" not in k:
        return NOT_MEASURED, f"arena not measured ({why_missing(row, 'arena')})"
    ours = k[f"{phase}_ns_arena"]
    for other, name in (("std", "glibc"), ("pmr", "pmr pool")):
        if f"{phase}_ns_{other}" not in k:
            parts.append((NOT_MEASURED, f"{name} not measured ({why_missing(row, other)})"))
            continue
        theirs = k[f"{phase}_ns_{other}"]
        if phase == "churn" and f"churn_{other}_over_arena" in k:
            # Churn alternates with the other contenders round by round: the paired ratio.
            r = k[f"churn_{other}_over_arena"]
            ok = r >= 1.0
            parts.append((MET if ok else MISSED,
                          f"{name} {fmt_num(theirs)} ns, {name}/arena {r:.2f} (paired median)"))
        else:
            ok = ours <= theirs
            parts.append((MET if ok else MISSED,
                          f"{name} {fmt_num(theirs)} ns, {name}/arena "
                          + (f"{theirs / ours:.2f}" if ours > 0 else "-")))
    return combine(parts), (f"arena {fmt_num(ours)} ns {unit}; "
                            + "; ".join(f"{t} [{s}]" for s, t in parts))


def noise(some_rounds_meet):
    """What the paired range says about a missed median."""
    return (", within the noise (some rounds meet it)" if some_rounds_meet
            else ", in every round")


def verdicts(row):
    """[(target, status, detail)] for one container: the node arena's targets this JSON can
    judge."""
    k = row["counters"]
    out = []
    if row["error"]:
        return [("all targets", NOT_MEASURED, f"the row failed: {row['error']}")]
    live = k.get("live_mib", 0) * MiB
    big = live >= LOOKUP_TARGET_MIN_LIVE
    below = (f"not judged at {fmt_size(round(live / MiB) * MiB)} live: the target applies from "
             f"1 GiB")

    # Lookups against glibc.
    target = f"lookup >= {LOOKUP_OVER_GLIBC}x glibc (glibc/arena, paired median)"
    r = ratio(row, "lookup_std_over_arena")
    if r is None:
        missing = "std" if "lookup_ns_std" not in k else "arena"
        out.append((target, NOT_MEASURED, f"{missing} not measured ({why_missing(row, missing)})"))
    elif not big:
        out.append((target, NOT_JUDGED, f"glibc/arena {fmt_ratio(r)}; {below}"))
    else:
        ok = r["median"] >= LOOKUP_OVER_GLIBC
        text = f"glibc/arena {fmt_ratio(r)}"
        if not ok:
            text += (f"; {100 * (1 - r['median'] / LOOKUP_OVER_GLIBC):.1f}% short"
                     + noise(r["max"] is not None and r["max"] >= LOOKUP_OVER_GLIBC))
        out.append((target, MET if ok else MISSED, text))

    # Lookups against the best peer.
    target = f"lookup: best of ours / best peer <= {OURS_OVER_BEST_PEER:.2f} (paired median)"
    best = best_of_ours_over_best_peer(row)
    if best is None:
        why = "; ".join(f"{who}: {why_missing(row, who)}" for who in OURS + PEERS
                        if f"lookup_ns_{who}" not in k) or "no ours/peer ratio in the JSON"
        out.append((target, NOT_MEASURED, why))
    else:
        ours, peer, r = best
        text = f"{ours}/{peer} {fmt_ratio(r, 3)}"
        gone = [p for p in PEERS if f"lookup_ns_{p}" not in k]
        if gone:
            text += "; left out: " + "; ".join(f"{p} ({why_missing(row, p)})" for p in gone)
        if not big:
            out.append((target, NOT_JUDGED, f"{text}; {below}"))
        elif gone:
            # The best peer may be the one that is missing: never a pass.
            out.append((target, MISSED if r["median"] > OURS_OVER_BEST_PEER else NOT_MEASURED,
                        text))
        else:
            ok = r["median"] <= OURS_OVER_BEST_PEER
            if not ok:
                text += (f"; {100 * (r['median'] / OURS_OVER_BEST_PEER - 1):.1f}% over"
                         + noise(r["min"] is not None and r["min"] <= OURS_OVER_BEST_PEER))
            out.append((target, MET if ok else MISSED, text))

    out.append(("build: no slower than glibc and the pmr pool",
                *no_slower(row, "build", "per insert (one build each)")))
    out.append(("churn: no slower than glibc and the pmr pool",
                *no_slower(row, "churn", "per erase+insert")))

    # RSS after the build.
    bound_text = f"{RSS_OVER_LIVE:.2f}x live + {NODE_CLASSES} x {fmt_size(ARENA_PAGE)}"
    target = f"arena RSS after build <= {bound_text} (one page per size class)"
    if "rss_over_live_arena" in k and live > 0:
        bound = RSS_OVER_LIVE + NODE_CLASSES * ARENA_PAGE / live
        got = k["rss_over_live_arena"]
        out.append((target, MET if got <= bound else MISSED,
                    f"RSS growth / live {got:.3f}, bound {bound:.3f} at "
                    f"{fmt_num(live / MiB)} MiB live"))
    elif "lookup_ns_arena" not in k:
        out.append((target, NOT_MEASURED, f"arena not measured ({why_missing(row, 'arena')})"))
    else:
        out.append((target, NOT_MEASURED, "no rss_over_live_arena: the build grew the process by "
                                          "less than half the live bytes (memory reused)"))

    # Coverage of the arena's pages: the arena over THP must be measured; the arena over 1 GiB
    # pages is judged too where it was built.
    target = f"arena coverage >= {100 * COVERAGE:.0f}% huge"
    parts = []
    notes = []
    for who in OURS:
        if f"coverage_{who}" in k:
            cov = k[f"coverage_{who}"]
            parts.append((MET if cov >= COVERAGE else MISSED, f"{who} {100 * cov:.2f}%"))
        elif who == "arena":
            parts.append((NOT_MEASURED, f"arena not measured ({why_missing(row, 'arena')})"))
        else:
            notes.append(f"{who} not measured ({why_missing(row, who)})")
    out.append((target, combine(parts), "; ".join([t for _, t in parts] + notes)))
    return out


# ---- the report -------------------------------------------------------------------------------

def contender_table(row):
    """(headers, rows, align): one line per contender, measured or left out."""
    k = row["counters"]
    headers = ["contender", "lookup ns", "vs arena (min-max)", "churn ns", "build ns",
               "RSS/live", "huge %", "coverage %"]
    align = ["l", "r", "r", "r", "r", "r", "r", "r"]
    out = []
    for who in CONTENDERS:
        if f"lookup_ns_{who}" not in k:
            out.append([who, "-", "left out", "-", "-", "-", "-", "-"])
            continue
        pct = lambda key: f"{100 * k[key]:.1f}" if key in k else "-"
        out.append([who, fmt_num(k[f"lookup_ns_{who}"]),
                    "1.00" if who == "arena" else fmt_ratio(ratio(row, f"lookup_{who}_over_arena")),
                    fmt_num(k.get(f"churn_ns_{who}")), fmt_num(k.get(f"build_ns_{who}")),
                    f"{k[f'rss_over_live_{who}']:.3f}" if f"rss_over_live_{who}" in k else "-",
                    pct(f"huge_share_{who}"), pct(f"coverage_{who}")])
    return headers, out, align


TITLE = "Paired node containers (arena_bench BM_Paired_<container>)"
METHOD = ("One process: each contender builds the container from the same keys, then the "
          "contenders take turns with batches of lookups and of erase+insert (churn), round "
          "after round, the order rotating. ns = median over the rounds; vs arena = the median of "
          "the per-round ratios contender/arena (>1: the arena was faster) with their min-max; "
          "build = one build each; RSS/live = what the build added to the process over the "
          "container's live bytes (left out where it reused memory); huge % = huge pages in that "
          "growth; coverage = the arena's pages on huge pages (backing_of).")


def context_line(data):
    c = data.get("context") or {}
    load = c.get("load_avg")
    load = ", ".join(f"{x:.2f}" for x in load) if isinstance(load, list) else load
    return (f"{c.get('date', '?')}: host {c.get('host_name', '?')}, {c.get('num_cpus', '?')} "
            f"CPUs at {c.get('mhz_per_cpu', '?')} MHz, load avg {load}")


def report(data, meta=None, machine=None):
    """(text, markdown) of the paired rows of one arena_bench JSON. `meta`: the runner's record
    of the run (rounds, size, command), `machine`: the machine header lines, where known."""
    meta = meta or {}
    text = [TITLE, METHOD, "Run: " + context_line(data)
            + (f"; {meta['rounds']} round(s)" if meta.get("rounds") else "")
            + (f"; {meta['wall_s']:.0f} s" if meta.get("wall_s") is not None else "")]
    if meta.get("cmd"):
        text.append("Command: " + shlex.join(meta["cmd"]))
    md = ["# " + TITLE, "", METHOD, "", text[2], ""]
    if meta.get("cmd"):
        md += ["```", shlex.join(meta["cmd"]), "```", ""]
    if machine:
        text += ["Machine:"] + machine
        md += ["## Machine", "", "```"] + machine + ["```", ""]
    md += ["## Contenders", "", "| contender | what |", "|:---|:---|"]
    md += [f"| {who} | {what} |" for who, what in CONTENDERS.items()] + [""]
    found = rows(data)
    if not found:
        text.append("no BM_Paired_ row in the JSON")
        md.append("No `BM_Paired_` row in the JSON.")
    tally = {}
    for row in found:
        k = row["counters"]
        name = CONTAINERS.get(row["container"], row["container"])
        size = (f"{row['elements']:,} elements"
                + (f", live {fmt_num(k['live_mib'])} MiB" if "live_mib" in k else "")
                + (f", {int(k['rounds'])} rounds" if "rounds" in k else ""))
        text += ["", f"{row['container']} ({name}): {size}"]
        md += [f"## {row['container']}", "", f"`{name}`: {size}.", ""]
        if row["error"]:
            text.append(f"  failed: {row['error']}")
            md += [f"Failed: {row['error']}", ""]
        else:
            headers, body, align = contender_table(row)
            text.append("  " + text_table(headers, body, align).replace("\n", "\n  "))
            md += [md_table(headers, body, align), ""]
            best = best_of_ours_over_best_peer(row)
            summary = [f"glibc / arena lookup: {fmt_ratio(ratio(row, 'lookup_std_over_arena'))}",
                       "best of ours / best peer lookup: "
                       + (f"{best[0]}/{best[1]} {fmt_ratio(best[2], 3)}" if best
                          else "not measured")]
            text += ["  " + s for s in summary]
            md += [f"- {s}" for s in summary]
            for who, why in row["left_out"].items():
                text.append(f"  left out: {who}: {why}")
                md.append(f"- left out: {who}: {why}")
            md.append("")
        text.append("  Targets (node arena):")
        md += ["Targets (node arena):", ""]
        for target, status, detail in verdicts(row):
            tally[status] = tally.get(status, 0) + 1
            text.append(f"    [{status}] {target}: {detail}")
            md.append(f"- **{status}** {target}: {detail}")
        md.append("")
    if tally:
        line = "Targets: " + ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
        text += ["", line, "Not covered here: RSS after erasing 90% or clear() (the "
                 "StdMap_Purge* tables of the main run)."]
        md += [line + ".", "", "Not covered here: RSS after erasing 90% of the nodes or "
               "`clear()` (the `StdMap_Purge*` tables of the main run).", ""]
    return "\n".join(text), "\n".join(md) + "\n"


def write_report(data, out_dir, meta=None, machine=None):
    """Prints the report and writes paired-nodes.md into out_dir; returns the Markdown path."""
    text, md = report(data, meta, machine)
    print(text)
    path = out_dir / MD_NAME
    path.write_text(md)
    print(f"Paired node comparison: {path}")
    return path
