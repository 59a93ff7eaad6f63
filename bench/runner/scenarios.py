"""The scenario family's tables and verdicts (registry table "scenario", bench/scenario_*.cpp).

A scenario row is one configuration running a service's request loop once per round; its cell's
counters are medians over the rounds, and the figures that decide (latency, RSS over live bytes,
huge share, recovery) show their min-max over the rounds beside the median. Per scenario and
working set: a table of latency and memory, a table of the kernel's counters over the loop, and a
verdict line: our row against the best peer on p99.9 and on RSS over live bytes ("first", "tied
within spread" or "behind", judged on the ranges over the rounds), and what the kernel counters
say happened.

A row whose child or helper process did not do its work (the binary's error "FAILED: ...", or a
process that died before it wrote its JSON) is FAILED: the table shows the reason instead of any
figure, in every round it failed and the others alike, and the verdict names it; it is never the
best of anything. Our
row is the one the suite's targets name (e.g. collapse: the fork scenario's row with upkeep),
else our row with the lowest p99.9; the peers are the process-wide configurations (jemalloc,
mimalloc, the glibc tunable, THP always); glibc std is the baseline, shown beside them.
"""

from .util import fmt_num, fmt_size

# (counter, heading, scale): the latency and memory table; ns counters shown in microseconds.
MAIN_COLUMNS = [("lat_p50_ns", "p50 us", 1e-3), ("lat_p99_ns", "p99 us", 1e-3),
                ("lat_p999_ns", "p99.9 us", 1e-3), ("lat_max_ns", "max us", 1e-3),
                ("requests_per_s", "req/s", 1), ("startup_ms", "start-up ms", 1),
                ("peak_rss_mib", "peak RSS MiB", 1), ("steady_rss_mib", "steady RSS MiB", 1),
                ("live_mib", "live MiB", 1), ("rss_over_live", "RSS/live", 1),
                ("huge_pct", "huge %", 1), ("process_huge_pct", "process huge %", 1)]
# Columns of one scenario or another, shown where a row has them.
EXTRA_COLUMNS = [("unforked_p999_ns", "unforked p99.9 us", 1e-3),
                 ("p999_over_unforked", "p99.9 / unforked", 1),
                 ("p999_child_alive_over_unforked", "... while a child lives", 1),
                 ("p999_catch_up_over_unforked", "... catching up after its exit", 1),
                 ("catch_up_requests", "catch-up requests", 1),
                 ("p999_no_child_over_unforked", "... after that", 1),
                 ("children_ok", "children ok", 1),
                 ("nodes_huge_pct", "nodes huge %", 1),
                 ("nodes_mapped_mib", "nodes mapped MiB", 1),
                 ("min_coverage_pct", "min huge %", 1),
                 ("recovery_ms_max", "to 99% ms (worst)", 1),
                 ("unrecovered_cycles", "children not recovered", 1),
                 ("upkeep_calls", "upkeep calls", 1),
                 ("upkeep_refused_chunks", "upkeep refused", 1),
                 ("upkeep_backed_off_calls", "upkeep backed off", 1),
                 ("upkeep_held_calls", "upkeep held", 1),
                 ("idle_rss_end_mib", "idle RSS MiB (end)", 1),
                 ("idle_rss_max_mib", "idle RSS MiB (max)", 1),
                 ("idle_rss_over_live", "idle RSS/live", 1)]
VMSTAT = ["compact_stall", "compact_fail", "compact_success", "thp_fault_alloc",
          "thp_fault_fallback", "thp_split_pmd", "thp_collapse_alloc", "thp_deferred_split_page"]
# This process's entries into direct compaction (bench/own_compactions.hpp), unlike vm_compact_stall.
OWN_COMPACTIONS = "own_direct_compactions"
BASELINE = "glibc std"
COUNTS = {"unrecovered_cycles", "requests_per_s", "upkeep_calls", "upkeep_refused_chunks",
          "upkeep_backed_off_calls", "upkeep_held_calls", "children_ok", "fork_cycles",
          "catch_up_requests"}
# Columns shown as "median (min-max)" over the rounds: the figures a verdict rests on.
RANGED = {"lat_p50_ns", "lat_p99_ns", "lat_p999_ns", "rss_over_live", "huge_pct",
          "recovery_ms_max", "p999_over_unforked", "p999_child_alive_over_unforked",
          "p999_catch_up_over_unforked", "p999_no_child_over_unforked", "idle_rss_over_live",
          "requests_per_s"}
FAILED = "FAILED: "


def failures(cell):
    """The reasons of the rounds in which the row failed (its child or helper did not do its
    work, or its process died): errors that start with FAILED."""
    return [e[len(FAILED):] for e in cell.errors if e.startswith(FAILED)]


def failed_text(cell):
    """'FAILED: why' for a failed row, with how many of its rounds failed when some did not."""
    why = failures(cell)
    rounds = len(why) + len(cell.samples)
    head = FAILED if rounds <= 1 else f"FAILED in {len(why)} of {rounds} rounds: "
    return head + why[0]


def is_measured(cell):
    """A row with figures to compare: measured, and failed in no round."""
    return bool(cell.samples) and not failures(cell)


def spread(cell, key, scale=1):
    """(min, max) of a counter over the rounds, scaled; None when no round has it."""
    xs = [s["counters"][key] * scale for s in cell.samples
          if isinstance(s["counters"].get(key), (int, float))]
    return (min(xs), max(xs)) if xs else None


def fmt_ranged(cell, key, scale, fmt):
    """The median, and '(min-max)' over the rounds when they differ."""
    text = fmt(num(cell, key, scale))
    r = spread(cell, key, scale)
    if r is not None and len(cell.samples) > 1 and r[0] != r[1]:
        text += f" ({fmt(r[0])}-{fmt(r[1])})"
    return text


def label_of(cell):
    """What the row ran on, as the binary's label says (e.g. '2 MiB pool (huge_page_allocator)')."""
    for s in cell.samples:
        if s["counters"].get("label"):
            return s["counters"]["label"]
    return ""


def rows_at(cells, suite, ws):
    return [c for c in cells.values() if c.suite == suite and c.ws == ws]


def ordered(cells_here, configs):
    order = {}
    for i, c in enumerate(configs):
        for a in c.allocators:
            order.setdefault(c.row_label(a), i)
    return sorted(cells_here, key=lambda c: (order.get(c.label, 99), c.label))


def num(cell, key, scale=1):
    v = cell.counters.get(key)
    return None if v is None else v * scale


def fmt_count(v):
    """A counter: whole numbers as such (a median of two rounds may be a half)."""
    return "-" if v is None else str(int(v)) if float(v).is_integer() else fmt_num(v)


def scenario_tables(cells, configs, suite, registry):
    """[(title, headers, rows, align)] for one scenario: per working set, the latency and memory
    table and the kernel counters table."""
    info = registry.get(suite)
    out = []
    for ws in sorted({c.ws for c in cells.values() if c.suite == suite}):
        here = ordered(rows_at(cells, suite, ws), configs)
        measured = [c for c in here if is_measured(c)]
        extra = [col for col in EXTRA_COLUMNS if any(col[0] in c.counters for c in measured)]
        cols = MAIN_COLUMNS + extra
        headers = ["configuration"] + [h for _, h, _ in cols] + ["n", "note"]
        rows = []
        for c in here:
            if failures(c):
                rows.append([c.label] + ["-"] * len(cols) + [str(c.n), failed_text(c)])
                continue
            if not c.samples:
                why = c.errors[0] if c.errors else "no result"
                rows.append([c.label] + ["-"] * len(cols) + ["0", f"skipped: {why}"])
                continue
            note = label_of(c)
            if c.errors:
                note += f"; {len(c.errors)} run(s) failed"
            rows.append([c.label] + [fmt_ranged(c, k, s, fmt_count if k in COUNTS else fmt_num)
                                     if k in RANGED else
                                     (fmt_count if k in COUNTS else fmt_num)(num(c, k, s))
                                     for k, _, s in cols] + [str(c.n), note])
        rounds = max((len(c.samples) + len(failures(c)) for c in here), default=0)
        title = (f"{suite} at {fmt_size(ws)}: {info.description if info else suite}. Latency from "
                 f"when each request was due (open loop) to its end, median over rounds of each "
                 f"round's percentile" + (f", (min-max) over the {rounds} rounds" if rounds > 1
                                          else "; 1 round: no spread")
                 + "; RSS/live = steady RSS (median during the loop) / live bytes; a FAILED row's "
                   "child or helper process did not do its work (no figure of it counts)")
        out.append((title, headers, rows, ["l"] + ["r"] * len(cols) + ["r", "l"]))
        vm_rows = [[c.label, fmt_count(num(c, OWN_COMPACTIONS))]
                   + [fmt_count(num(c, "vm_" + v)) for v in VMSTAT]
                   for c in here if is_measured(c)]
        if vm_rows:
            out.append((f"{suite} at {fmt_size(ws)}: the row's own entries into direct compaction "
                        f"(its process only, from the kernel's tracepoint; '-' where it cannot "
                        f"be counted), then /proc/vmstat deltas over the request loop "
                        f"(machine-wide: other processes count too)",
                        ["configuration", "own direct compactions"] + VMSTAT, vm_rows,
                        ["l"] + ["r"] * (len(VMSTAT) + 1)))
    return out


def ours_token(registry, suite):
    """The row our targets name for a suite (its allocator token), or None."""
    info = registry.get(suite)
    for t in (info.targets if info else ()):
        if t["of"] not in ("ours", "std", ""):
            return t["of"]
    return None


def rss_key(cell):
    return "idle_rss_over_live" if "idle_rss_over_live" in cell.counters else "rss_over_live"


def best(cells_here, key):
    with_key = [c for c in cells_here if c.counters.get(key) is not None]
    return min(with_key, key=lambda c: c.counters[key]) if with_key else None


def verdict(cells, configs, suite, ws, registry):
    """A dict for results.json with the verdict line under "line"; "computed" says whether ours
    and something to compare it with were both measured."""
    by_name = {c.name: c for c in configs}
    everything = [c for c in rows_at(cells, suite, ws) if c.config in by_name]
    failed = [c for c in everything if failures(c)]
    here = [c for c in everything if is_measured(c)]
    ours_rows = [c for c in here if not by_name[c.config].peer and c.allocator != "std"]
    token = ours_token(registry, suite)
    named = [c for c in ours_rows if c.allocator == token]
    ours = named[0] if named else best(ours_rows, "lat_p999_ns")
    peers = [c for c in here if by_name[c.config].peer]
    base = next((c for c in here if c.label == BASELINE), None)
    head = f"Verdict {suite} at {fmt_size(ws)}"
    failed_note = "; ".join(f"{c.label} {failed_text(c)}" for c in failed)
    if ours is None:
        ours_failed = [c for c in failed if not by_name[c.config].peer and c.allocator != "std"]
        why = "ours FAILED" if ours_failed else "no row of ours measured"
        return {"suite": suite, "ws": ws, "computed": False, "failed": [c.label for c in failed],
                "line": f"{head}: not computed ({why})"
                        + (f"; {failed_note}" if failed_note else "")}
    others = peers or ([base] if base else [])
    if not others:
        return {"suite": suite, "ws": ws, "computed": False, "failed": [c.label for c in failed],
                "line": f"{head}: not computed (no peer and no glibc std row measured)"
                        + (f"; {failed_note}" if failed_note else "")}
    what = "best peer" if peers else "(no peer measured)"
    lat = best(others, "lat_p999_ns")
    mem = best(others, rss_key(ours))
    us = lambda c: fmt_num(c.counters["lat_p999_ns"] / 1e3)
    parts = []
    if lat is not None and ours.counters.get("lat_p999_ns") is not None:
        ratio = ours.counters["lat_p999_ns"] / lat.counters["lat_p999_ns"] \
            if lat.counters["lat_p999_ns"] else None
        parts.append(f"p99.9 {ours.label} {us(ours)} us vs {what} {lat.label} {us(lat)} us"
                     + (f" (ratio {ratio:.2f})" if ratio is not None else ""))
    key = rss_key(ours)
    if mem is not None and ours.counters.get(key) is not None:
        parts.append(f"{key.replace('_', ' ')} {ours.label} {ours.counters[key]:.2f} vs {what} "
                     f"{mem.label} {mem.counters[key]:.2f}")
    if base is not None and base is not lat and base.counters.get("lat_p999_ns") is not None:
        parts.append(f"glibc std p99.9 {us(base)} us, {key.replace('_', ' ')} "
                     f"{fmt_num(base.counters.get(key))}")
    if "recovery_ms_max" in ours.counters:
        fastest = best(others, "recovery_ms_max")
        parts.append(f"back to 99% huge after each child: {ours.label} "
                     f"{fmt_num(ours.counters['recovery_ms_max'])} ms worst "
                     f"({fmt_count(ours.counters.get('unrecovered_cycles'))} not back), "
                     + (f"{what} {fastest.label} {fmt_num(fastest.counters['recovery_ms_max'])} ms "
                        f"({fmt_count(fastest.counters.get('unrecovered_cycles'))} not back)"
                        if fastest else "no other row measured"))
    if "threads" in ours.counters:  # closed loop: throughput decides as much as the tail
        fastest = max(others, key=lambda c: c.counters.get("requests_per_s") or 0)
        top = fastest.counters.get("requests_per_s")
        for c in sorted(ours_rows, key=lambda c: c.label):
            mine = c.counters.get("requests_per_s")
            if mine and top:
                parts.append(f"ops/s {c.label} {fmt_num(mine)} vs {fastest.label} {fmt_num(top)} "
                             f"({mine / top:.2f}x; {fmt_ranged(c, 'requests_per_s', 1, fmt_num)} "
                             f"vs {fmt_ranged(fastest, 'requests_per_s', 1, fmt_num)}), "
                             f"p99.9 {fmt_ranged(c, 'lat_p999_ns', 1e-3, fmt_num)} us")
    parts.append("kernel: " + kernel_story(ours, others))
    rivals = [c for c in others + ([base] if base and base not in others else [])]
    p999_standing = standing(ours, rivals, "lat_p999_ns")
    rss_standing = standing(ours, rivals, key)
    lead = []
    if p999_standing:
        lead.append(f"p99.9 {p999_standing}")
    if rss_standing:
        lead.append(f"{key.replace('_', ' ')} {rss_standing}")
    if failed_note:
        parts.append("FAILED rows (not compared): " + failed_note)
    return {"suite": suite, "ws": ws, "computed": True, "ours": ours.label,
            "best_peer_p999": lat.label if lat else None, "best_peer_rss": mem.label if mem else None,
            "p999_standing": p999_standing, "rss_standing": rss_standing,
            "failed": [c.label for c in failed],
            "line": f"{head}: " + (f"ours {', '.join(lead)}; " if lead else "") + "; ".join(parts)}


def standing(ours, rivals, key):
    """Where ours stands on `key` (lower is better) among the rivals, from each row's range over
    the rounds: "first" when its worst round beats every rival's best, "behind (<row> ...)" when
    its best round is worse than a rival's worst, else "tied within spread (with <row>)"; with one
    round the ranges are points, and the text says so. None when ours or no rival has the key."""
    mine = spread(ours, key)
    theirs = [(c, spread(c, key)) for c in rivals if c is not ours and spread(c, key)]
    if mine is None or not theirs:
        return None
    one_round = len(ours.samples) <= 1 or all(len(c.samples) <= 1 for c, _ in theirs)
    note = " (1 round: no spread)" if one_round else ""
    if all(mine[1] < r[0] for _, r in theirs):
        return "first" + note
    ahead = [c for c, r in theirs if r[1] < mine[0]]
    if ahead:
        best = min(ahead, key=lambda c: c.counters.get(key, float("inf")))
        return f"behind {best.label}" + note
    closest = min(theirs, key=lambda cr: cr[0].counters.get(key, float("inf")))[0]
    return f"tied within spread (with {closest.label})" + note


def kernel_story(ours, others):
    """What the vmstat deltas say: ours, and the largest of each counter among the others."""
    def delta(c, name):
        return c.counters.get("vm_" + name)
    mine = [f"{n} +{fmt_count(delta(ours, n))}" for n in
            ("compact_stall", "thp_fault_fallback", "thp_split_pmd", "thp_collapse_alloc")
            if delta(ours, n) is not None]
    own = ours.counters.get(OWN_COMPACTIONS)
    if own is not None:
        mine.insert(0, f"own direct compactions +{fmt_count(own)}")
    text = f"{ours.label} " + (", ".join(mine) if mine else "no vmstat counters")
    text = text.replace("+-", "-")
    worst = []
    for n in ("compact_stall", "thp_fault_fallback", "thp_split_pmd", "thp_collapse_alloc"):
        rows = [c for c in others if delta(c, n) is not None]
        if rows:
            top = max(rows, key=lambda c: delta(c, n))
            worst.append(f"{n} up to +{fmt_count(delta(top, n))} ({top.label})")
    return text + ("; others: " + ", ".join(worst) if worst else "")


def scenario_report(cells, configs, registry, verdict_lines):
    """(console lines, markdown lines, verdicts) for every scenario with cells; verdict_lines is
    targets.verdict_lines' result (the targets the scenarios declare)."""
    from .tables import md_table, text_table
    out, md, verdicts = [], [], []
    for suite in registry.scenarios():
        if not any(c.suite == suite for c in cells.values()):
            continue
        md += [f"## {suite}", ""]
        for title, headers, rows, align in scenario_tables(cells, configs, suite, registry):
            out += [title, text_table(headers, rows, align), ""]
            md += [title, "", md_table(headers, rows, align), ""]
        for ws in sorted({c.ws for c in cells.values() if c.suite == suite}):
            v = verdict(cells, configs, suite, ws, registry)
            verdicts.append(v)
            out.append(v["line"])
            md += [v["line"], ""]
        if verdict_lines.get(suite):
            out += ["Targets:"] + ["  " + line for _, line in verdict_lines[suite]]
            md += ["Targets:", ""] + [f"- {line}" for _, line in verdict_lines[suite]] + [""]
        out.append("")
    return out, md, verdicts
