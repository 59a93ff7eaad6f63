"""Judging the targets a suite declares (bench/registry.hpp target_info, printed by
`hugepage_bench --list --json`): the runner holds no target of its own.

A target names rows by allocator token ("std" is glibc, a peer by its name), or "ours" (our row
with the highest paired speedup over glibc, stats.compare_with_peers) over "best_peer" (the peer
that ours does worst against). Its value is the ns of one row over another, paired per round
(median, with the per-round min-max), a counter of one row over another's, or a counter of one
row against its bound (plus slack_bytes over the row's live bytes). Each working set of the suite
gets a status: met, missed, not measured (a row it needs is missing: never a pass), or not
judged (below from_bytes).
"""

from . import stats
from .util import MiB, fmt_num, fmt_size

MET, MISSED, NOT_MEASURED, NOT_JUDGED = "met", "missed", "not measured", "not judged"


def find_row(cells, configs, suite, ws, token):
    """The cell of row `token` ("std", "thp", ..., "jemalloc") at one working set, or None."""
    by_name = {c.name: c for c in configs}
    for c in cells.values():
        if c.suite != suite or c.ws != ws:
            continue
        config = by_name.get(c.config)
        if config is None:
            continue
        if config.peer and c.allocator == "std" and config.name == token:
            return c
        if not config.peer and c.allocator == token:
            return c
    return None


def why_missing(cell, token):
    if cell is None:
        return f"{token} not measured"
    failed = [e for e in cell.errors if e.startswith("FAILED: ")]
    if failed:  # its child or helper did not do its work: no figure of it counts
        return f"{token} not measured ({failed[0]})"
    if not cell.samples:
        return f"{token} not measured ({cell.errors[0] if cell.errors else 'no result'})"
    return ""


def _range_note(target, r):
    """What the per-round range says about a missed median."""
    if r is None or r.get("min") is None:
        return ""
    reaches = r["max"] >= target["bound"] if target["at_least"] else r["min"] <= target["bound"]
    return ", within the noise (some rounds meet it)" if reaches else ", in every round"


def fmt_ratio(r, digits=2):
    """'1.37 (1.31-1.47, n=15)'."""
    text = f"{r['median']:.{digits}f}"
    if r.get("min") is not None:
        text += f" ({r['min']:.{digits}f}-{r['max']:.{digits}f}, n={r['n']})"
    return text


def value_of(target, cells, configs, suite, ws):
    """(value, ratio summary or None, text, missing): the target's value at one working set, or
    value None and `missing` (why) when a row it needs is not there. `missing` may also be set
    with a value: ours over the best peer with a peer left out."""
    of, over, counter = target["of"], target["over"], target["counter"]
    if of == "ours" and over == "best_peer":
        cmp = next((c for c in stats.compare_with_peers(cells, configs, suite) if c["ws"] == ws),
                   None)
        peers = [c.name for c in configs if c.peer]
        gone = [why_missing(find_row(cells, configs, suite, ws, p), p) for p in peers]
        gone_text = "; ".join(g for g in gone if g)
        if cmp is None:
            return None, None, "", "no row of ours measured"
        best = next((p for p in cmp["peers"] if p["peer"] == cmp["best_peer"]), None)
        if best is None:
            return None, None, "", gone_text or "no peer measured"
        r = best["ours_over_peer"]
        text = f"{cmp['ours']}/{best['peer']} {fmt_ratio(r, 3)}"
        return r["median"], r, text, gone_text
    a = find_row(cells, configs, suite, ws, of)
    if why_missing(a, of):
        return None, None, "", why_missing(a, of)
    if target.get("over_suite"):
        twin = target["over_suite"]
        b = find_row(cells, configs, twin, ws, of)
        if why_missing(b, of):
            return None, None, "", f"{twin}: {why_missing(b, of)}"
        if counter not in a.counters or not b.counters.get(counter):
            return None, None, "", f"no {counter} of {of} in {suite} and {twin}"
        value = a.counters[counter] / b.counters[counter]
        return value, None, (f"{of} {counter} {fmt_num(a.counters[counter])}, in {twin} "
                             f"{fmt_num(b.counters[counter])}: ratio {value:.2f}"), ""
    if not over:
        if counter not in a.counters:
            return None, None, "", f"{of} has no {counter}"
        value = a.counters[counter]
        return value, None, f"{of} {counter} {fmt_num(value)}", ""
    b = find_row(cells, configs, suite, ws, over)
    if why_missing(b, over):
        return None, None, "", why_missing(b, over)
    if counter:
        if counter not in a.counters or counter not in b.counters or not b.counters[counter]:
            return None, None, "", f"no {counter} of {of} and {over}"
        value = a.counters[counter] / b.counters[counter]
        return value, None, (f"{of} {fmt_num(a.counters[counter])}, {over} "
                             f"{fmt_num(b.counters[counter])}: {of}/{over} {value:.2f}"), ""
    r = stats.ratio_summary(stats.paired_ratios(a, b))
    if r is None:
        return None, None, "", f"{of} and {over} share no round"
    return r["median"], r, f"{of}/{over} {fmt_ratio(r)}", ""


def judge(target, cells, configs, suite, ws):
    """(status, detail) of one target at one working set."""
    value, r, text, missing = value_of(target, cells, configs, suite, ws)
    if value is None:
        return NOT_MEASURED, missing
    bound = target["bound"]
    if target.get("slack_bytes"):
        live = find_row(cells, configs, suite, ws, target["of"]).counters.get("container_mib")
        if not live:
            return NOT_MEASURED, f"{text}; no container_mib to size the bound"
        bound += target["slack_bytes"] / (live * MiB)
        text += f", bound {bound:.3f} at {fmt_num(live)} MiB live"
    if ws < target.get("from_bytes", 0):
        return NOT_JUDGED, (f"{text}; not judged at {fmt_size(ws)}: the target applies from "
                            f"{fmt_size(target['from_bytes'])}")
    ok = value >= bound if target["at_least"] else value <= bound
    if missing:
        # A missing row (a peer left out) could only make the value worse: never a pass.
        return (NOT_MEASURED if ok else MISSED), f"{text}; left out: {missing}"
    if ok:
        return MET, text
    return MISSED, text + _range_note(dict(target, bound=bound), r)


def verdict_lines(registry, cells, configs, paired):
    """{suite: [(status, line)]}: every target of the suites present, at each working set,
    `paired` choosing the targets judged on the paired comparison or on the rounds."""
    out = {}
    for suite in registry.suites:
        wanted = [t for t in suite.targets if bool(t["paired"]) == paired]
        sizes = sorted({c.ws for c in cells.values() if c.suite == suite.name})
        for t in wanted:
            for ws in sizes:
                status, detail = judge(t, cells, configs, suite.name, ws)
                out.setdefault(suite.name, []).append(
                    (status, f"[{status}] {fmt_size(ws)}: {t['claim']}: {detail}"))
    return out


def tally(lines_by_suite):
    """'Targets: 7 met, 4 missed' over every line, or ''."""
    counts = {}
    for lines in lines_by_suite.values():
        for status, _ in lines:
            counts[status] = counts.get(status, 0) + 1
    return ("Targets: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))) if counts \
        else ""
