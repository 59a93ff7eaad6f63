"""Tables: text for the console, Markdown for results.md, from the cells of execute.collect.

A table is (title, headers, rows, align): the same data renders both ways.
"""

from .stats import median
from .util import fmt_num, fmt_size

# Percentile counters of the tail suites (bench/latency.hpp) and their column headers.
TAIL_COLUMNS = [("lat_p50_ns", "p50 ns"), ("lat_p99_ns", "p99 ns"), ("lat_p999_ns", "p99.9 ns")]


def fmt_ratio_range(summary, digits=2):
    """'min-max, n=N' of a ratio_summary."""
    return f"{summary['min']:.{digits}f}-{summary['max']:.{digits}f}, n={summary['n']}"


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


def coverage_note(cell, config, registry=None):
    cov = cell.counters.get("coverage_pct")
    if cov is None or not config.expect_huge and cell.allocator == "std":
        return ""
    suite = registry.get(cell.suite) if registry is not None else None
    if suite is not None and suite.decays_on_purpose:
        return ""  # low coverage is what such a suite measures
    if cov < 5:
        return "no huge pages: misconfigured?"
    if cov < 90:
        return "partial huge coverage"
    return ""


def suite_table(cells, configs, suite, registry):
    """(title, headers, rows, align) for one suite, or None when it has no cells. The
    percentiles of the suite's tail suites (registry: table "tail", tail_of this suite) are
    columns beside its median."""
    by_name = {c.name: c for c in configs}
    mine = [c for c in cells.values() if c.suite == suite]
    if not mine:
        return None
    order = {l: i for i, l in enumerate(label_order(configs))}
    mine.sort(key=lambda c: (c.ws, order.get(c.label, 99), c.label))
    has = lambda k: any(k in c.counters for c in mine)
    info = registry.get(suite)
    unit, scale = (info.per_op, info.scale) if info else ("ns/op", 1.0)
    tails = [t.name for t in registry.tails_of(suite)]
    tail_of = lambda c: next((cells[k] for k in ((t, c.label, c.ws) for t in tails)
                              if k in cells and cells[k].samples), None)
    tail_cells = [t for t in map(tail_of, mine) if t]
    num = lambda x: fmt_num(x / scale if x is not None else None)
    headers = ["working set", "configuration", unit, "spread (min-max)", "vs glibc std",
               "vs std min-max", "pairs", "huge %", "peak RSS MiB"]
    align = ["r", "l", "r", "r", "r", "r", "r", "r", "r"]
    extra = []
    for key, head in TAIL_COLUMNS:
        if any(key in t.counters for t in tail_cells):
            extra.append((head, lambda c, key=key: fmt_num(
                tail_of(c).counters.get(key) if tail_of(c) else None)))
    if has("on_1g_pct"):  # the 1 GiB allocator's rows: how much of the block its cascade
        # put on 1 GiB pages (the rest is on 2 MiB pages)
        extra.append(("on 1G %", lambda c: fmt_num(c.counters.get("on_1g_pct"))))
    if has("bytes_per_second"):
        extra.append(("GB/s", lambda c: fmt_num(c.counters["bytes_per_second"] / 1e9)
                      if "bytes_per_second" in c.counters else "-"))
    if has("page_walks_per_op"):
        extra.append(("walks/op", lambda c: fmt_num(c.counters.get("page_walks_per_op"))))
    if has("dtlb_loads_per_op"):
        extra.append(("dTLB loads/op", lambda c: fmt_num(c.counters.get("dtlb_loads_per_op"))))
    if has("page_faults"):
        extra.append(("faults/op", lambda c: fmt_num(c.counters.get("page_faults"), 2)))
    headers += [h for h, _ in extra] + ["n", "note"]
    align += ["r"] * len(extra) + ["r", "l"]
    rows = []
    prev_ws = None
    for c in mine:
        ws = fmt_size(c.ws) if c.ws != prev_ws else ""
        prev_ws = c.ws
        config = by_name[c.config]
        if not c.samples:
            msg = "skipped: " + (c.errors[0] if c.errors else "no result")
            rows.append([ws, c.label, "-", "-", "-", "-", "0", "-", "-"] + ["-"] * len(extra)
                        + ["0", msg])
            continue
        spread = f"{num(c.min_ns)}-{num(c.max_ns)}"
        cov = c.counters.get("coverage_pct")
        note = coverage_note(c, config, registry)
        if suite == "FaultIn" and config.peer and c.counters.get("page_faults", 1) < 0.5:
            note = (note + "; " if note else "") + "0 faults: reused memory, not a first touch"
        if c.errors:
            note = (note + "; " if note else "") + f"{len(c.errors)} run(s) failed"
        sp = c.speedup
        rows.append([ws, c.label, num(c.median_ns), spread,
                     f"{sp['median']:.2f}x" if sp else "-",
                     f"{sp['min']:.2f}-{sp['max']:.2f}" if sp else "-",
                     str(sp["n"]) if sp else "0",
                     f"{cov:.1f}" if cov is not None else "-",
                     fmt_num(c.counters.get("peak_rss_mib"))]
                    + [f(c) for _, f in extra] + [str(c.n), note])
    title = (f"{suite}: {unit}, median over n interleaved rounds; spread = min-max over rounds; "
             f"vs glibc std = ratios paired per round: median over the rounds where both ran of "
             f"glibc std / row in that round (>1 is faster), their min-max and number of pairs")
    if tail_cells:
        timer = median([t.counters.get("timer_ns") for t in tail_cells])
        title += (f"; p50/p99/p99.9 = {', '.join(tails)}: each operation timed alone (batches of "
                  f"{registry.latency_batch}), the timer's own cost ({fmt_num(timer)} ns a pair "
                  f"of readings) subtracted, median over rounds of each round's percentile; a "
                  f"lone timed lookup cannot overlap the next, so p50 is above the mean")
    return title, headers, rows, align


# Optional columns of a bloat table: counter, heading (the purge suites of bench/suites_nodes.cpp).
BLOAT_EXTRA_COLUMNS = [("built_live_mib", "built: live MiB"),
                       ("built_resident_mib", "built: resident MiB"),
                       ("cleared_resident_mib", "after clear(): resident MiB")]


def bloat_table(cells, configs, suite="Bloat_Sparse", description=None):
    mine = [c for c in cells.values() if c.suite == suite and c.samples]
    if not mine:
        return None
    order = {l: i for i, l in enumerate(label_order(configs))}
    mine.sort(key=lambda c: (c.ws, order.get(c.label, 99)))
    extra = [(key, head) for key, head in BLOAT_EXTRA_COLUMNS
             if any(key in c.counters for c in mine)]
    headers = ["working set", "configuration", "live KiB", "resident MiB", "resident / live",
               "container MiB", "huge %", "process RSS MiB"] + [h for _, h in extra]
    align = ["r", "l", "r", "r", "r", "r", "r", "r"] + ["r"] * len(extra)
    unseen = any(c.counters.get("resident_before_build") for c in mine)
    if unseen:
        headers.append("note")
        align.append("l")
    rows = []
    prev = None
    for c in mine:
        k = c.counters
        live_kib = k.get("live_kib")
        resident = k.get("resident_mib")
        bloat = k.get("bloat_x")
        if bloat is None and live_kib and resident is not None:
            bloat = resident * 1024 / live_kib
        cov = k.get("coverage_pct")
        bloat_text = "-" if bloat is None else f"{bloat:.0f}x" if bloat >= 10 else f"{bloat:.2f}x"
        rows.append([fmt_size(c.ws) if c.ws != prev else "", c.label, fmt_num(live_kib),
                     fmt_num(resident), bloat_text,
                     fmt_num(k.get("container_mib")), f"{cov:.1f}" if cov is not None else "-",
                     fmt_num(k.get("rss_mib"))] + [fmt_num(k.get(key)) for key, _ in extra]
                    + (["resident before the build (reserved at start-up): not measurable"
                        if k.get("resident_before_build") else ""] if unseen else []))
        prev = c.ws
    if suite == "Bloat_Sparse" or not description:
        title = (f"{suite}, the other side of the trade: one live 64-byte object per 2 MiB of a "
                 "big block; resident vs live bytes (medians over rounds)")
    else:
        title = f"{suite}: {description} (medians over rounds)"
    return title, headers, rows, align


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
                f"the one with the highest median ours/peer:"] + lines
