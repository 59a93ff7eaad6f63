"""Statistics over rounds: medians, quartiles, ratios paired per round, ours against the peers.

Every function takes plain numbers or cells (dicts made by execute.collect) and returns plain
data, so that the tests can feed it made-up samples.
"""

import math
import statistics
from dataclasses import asdict, dataclass, field


@dataclass
class Cell:
    """One table cell: a suite's row of one configuration at one working set, over the rounds.
    execute.collect makes it, summarize() fills the summary, results.json keeps it whole."""
    suite: str
    label: str           # the row: "glibc std", "ours thp", "jemalloc", ...
    ws: int              # working set, bytes
    config: str          # the configuration's name
    allocator: str
    samples: list = field(default_factory=list)  # per round: {"round", "ns", "counters"}
    errors: list = field(default_factory=list)   # the binary's SkipWithError messages
    n: int = 0
    median_ns: float = None
    min_ns: float = None
    max_ns: float = None
    q1_ns: float = None
    q3_ns: float = None
    counters: dict = field(default_factory=dict)  # median over rounds of each counter
    coverage_min: float = None
    speedup: dict = None  # ratio_summary of glibc std / this row, paired per round

    def to_json(self):
        return asdict(self)


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
    den_ns = {s["round"]: s["ns"] for s in den.samples}
    return sorted((s["round"], s["ns"] / den_ns[s["round"]])
                  for s in num.samples if den_ns.get(s["round"]))


def ratio_summary(pairs):
    """Median, min, max and n of paired ratios, with the pairs themselves; None without a pair."""
    if not pairs:
        return None
    ratios = [x for _, x in pairs]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "n": len(ratios), "pairs": [{"round": r, "ratio": x} for r, x in pairs]}


def summarize(cell):
    """Fills a cell's summary fields from its samples: n, median/min/max/quartiles of ns, the
    median of each counter over the rounds, and the lowest huge-page coverage seen."""
    ns = [s["ns"] for s in cell.samples]
    cell.n = len(ns)
    cell.median_ns = median(ns)
    cell.min_ns = min(ns) if ns else None
    cell.max_ns = max(ns) if ns else None
    cell.q1_ns, cell.q3_ns = quartiles(sorted(ns)) if ns else (None, None)
    keys = set()
    for s in cell.samples:
        keys |= {k for k, v in s["counters"].items() if isinstance(v, (int, float))}
    cell.counters = {k: median([s["counters"].get(k) for s in cell.samples
                                   if k in s["counters"]]) for k in sorted(keys)}
    cell.coverage_min = min((s["counters"]["coverage_pct"] for s in cell.samples
                                if "coverage_pct" in s["counters"]), default=None)
    return cell


def compare_with_peers(cells, configs, suite):
    """Per working set of a suite: our best huge-page row (highest paired speedup over glibc std)
    against every peer, ours/peer paired per round. The best peer is the one that gives the
    highest median ours/peer. A list of dicts, as saved in results.json."""
    by_name = {c.name: c for c in configs}
    by_paired_speedup = lambda c: (c.speedup["median"] if c.speedup else 0.0, -c.median_ns)
    out = []
    for ws in sorted({c.ws for c in cells.values() if c.suite == suite}):
        row = [c for c in cells.values() if c.suite == suite and c.ws == ws and c.samples]
        ours = [c for c in row if not by_name[c.config].peer and c.allocator != "std"]
        if not ours:
            continue
        best = max(ours, key=by_paired_speedup)
        peers = [{"peer": p.label, "peer_median_ns": p.median_ns,
                  "ours_over_peer": ratio_summary(paired_ratios(best, p))}
                 for p in row if by_name[p.config].peer]
        paired = [p for p in peers if p["ours_over_peer"]]
        best_peer = max(paired, key=lambda p: p["ours_over_peer"]["median"], default=None)
        one_g = next((c for c in ours if c.allocator == "hugetlb_1g"), None)
        out.append({"suite": suite, "ws": ws, "ours": best.label,
                    "ours_allocator": best.allocator, "ours_median_ns": best.median_ns,
                    "vs_glibc_std": best.speedup, "peers": peers,
                    "best_peer": best_peer["peer"] if best_peer else None,
                    "hugetlb_1g_median_ns": one_g.median_ns if one_g and one_g is not best
                    else None})
    return out
