"""One output directory's report: the tables on stdout, results.md, results.json and chart.png."""

import os
import json
import sys

from . import stats, sysfs, targets
from .chart import draw_chart
from .execute import collect, collect_paired
from .machine import machine_lines
from .scenarios import scenario_report
from .tables import bloat_table, coverage_note, md_table, suite_table, targets_summary, text_table


def relative_context(context, out_dir):
    """The benchmark's JSON context with the executable's path relative to out_dir."""
    context = dict(context or {})
    if os.path.isabs(context.get("executable", "")):
        context["executable"] = os.path.relpath(context["executable"], out_dir)
    return context


def report(args, registry, out_dir, stamp, configs, skipped, runs, wall):
    """Tables on stdout, results.md, results.json and chart.png in out_dir. Every path written
    into the results files is relative to out_dir."""
    if not any(r.data for r in runs):
        sys.exit(f"error: no run produced JSON; see {out_dir / 'logs'}")

    cells = collect(runs, configs, {"cpu": "cpu_time", "real": "real_time"}.get(args.time, "auto"))

    # Peers: does the context of their runs show the preload? (and did the run see it at all)
    for c in configs:
        if not c.peer or not c.lib:
            continue
        ctxs = [r.data.get("context", {}) for r in runs if r.config == c.name and r.data]
        seen = [any(os.path.basename(c.lib) in str(v) for v in ctx.values()) for ctx in ctxs]
        c.context_shows_preload = all(seen) if seen else None

    # Configurations under a machine-wide THP mode: did their runs see it (the JSON context)?
    for c in configs:
        wanted = c.sysfs.get(sysfs.THP_ENABLED)
        if wanted:
            ctxs = [r.data.get("context", {}) for r in runs if r.config == c.name and r.data]
            c.verified = bool(ctxs) and all(
                f"[{wanted}]" in ctx.get("thp_enabled", "") or ctx.get("thp_enabled") == wanted
                for ctx in ctxs)

    first = next(r for r in runs if r.data)
    context = relative_context(first.data.get("context", {}), out_dir)
    out = []
    out.append(f"Machine (from the JSON context of {first.json}):")
    out += machine_lines(context, args)
    out.append(f"Runs: {len(runs)} ({args.rounds} round(s), {len(configs)} configuration(s); "
               f"all suites in rounds {sorted(args.heavy_round_set)}, the core ones in every round; "
               f"peers in rounds {sorted(args.peer_round_set)}), "
               f"wall {wall:.0f} s; each cell = median over rounds, ratios paired per round, "
               f"{'google-benchmark time (CPU for lookups, real for build/fault-in/bloat)' if args.time == 'auto' else args.time + ' time'}.")
    out.append("Configurations:")
    for c in configs:
        extra = ""
        if c.sysfs.get(sysfs.THP_ENABLED):
            extra = "  [THP mode in its runs' JSON context: " + ("yes" if c.verified else "NO") + "]"
        elif c.peer:
            extra = "  [load probe: " + ("ok" if c.verified else "FAILED") + \
                    ("" if not c.lib else f"; JSON context shows LD_PRELOAD: "
                     f"{ {True: 'yes', False: 'no', None: '?'}[c.context_shows_preload] }") + "]"
        out.append(f"  {c.name:<16} {c.env_text()}{extra}")
    for s in skipped:
        out.append(f"  skipped: {s}")
    out.append("")

    md = ["# hugepage benchmark results", "", f"Run {stamp}; paths below are relative to this file's directory.", "",
          "## Machine", "", "```"] + machine_lines(context, args) + ["```", "", "## Configurations", "",
          "| configuration | environment | allocators | note |", "|:---|:---|:---|:---|"]
    for c in configs:
        md.append(f"| {c.name} | `{c.env_text()}` | {','.join(c.allocators)} | {c.note} |")
    md.append("")

    # One table per suite in registry order; tail suites are columns of their suite's table,
    # bloat suites get the bloat table after FlatHashMap_Lookup's (or alone).
    known = registry.names()
    present = [s for s in known + sorted({c.suite for c in cells.values()} - set(known))
               if any(c.suite == s for c in cells.values())
               and (registry.get(s) is None or registry.get(s).table == "time")]
    bloat = [s for s in known if registry.get(s).table == "bloat"
             and any(c.suite == s for c in cells.values())]
    comparisons = {suite: stats.compare_with_peers(cells, configs, suite) for suite in present}
    verdicts = targets.verdict_lines(registry, cells, configs, paired=False)

    def add_bloat(first_line_blank):
        for s in bloat:
            b = bloat_table(cells, configs, s, registry.get(s).description)
            if b:
                out.extend(([""] if first_line_blank else []) + [b[0], text_table(*b[1:])]
                           + ([] if first_line_blank else [""]))
                md.extend([f"## {s}", "", b[0], "", md_table(*b[1:]), ""])

    for suite in present:
        t = suite_table(cells, configs, suite, registry)
        if not t:
            continue
        title, headers, rows, align = t
        out += [title, text_table(headers, rows, align)]
        md += [f"## {suite}", "", title, "", md_table(headers, rows, align), ""]
        if suite.endswith("_Lookup"):  # the lookup suites: ours against the best peer
            summ = targets_summary(comparisons[suite], suite)
            out += summ
            md += ["```"] + summ[1:] + ["```", ""] if summ else []
        if verdicts.get(suite):
            out += ["Targets:"] + ["  " + line for _, line in verdicts[suite]]
            md += ["Targets:", ""] + [f"- {line}" for _, line in verdicts[suite]] + [""]
        if suite == "FlatHashMap_Lookup":
            add_bloat(True)
        out.append("")
    if "FlatHashMap_Lookup" not in present:
        add_bloat(False)
    scen_out, scen_md, scenario_verdicts = scenario_report(cells, configs, registry, verdicts)
    out += scen_out
    md += scen_md

    chart = out_dir / "chart.png"
    err = draw_chart(cells, configs, chart, registry.chart_suites(), registry) if present else \
        "no suite of the chart ran"
    out.append(f"Chart: {chart}" if err is None else f"Chart: none ({err})")
    md += ["## Chart", "", "![ns per lookup vs working set](chart.png)" if err is None else err, ""]
    if verdicts:
        out.append(targets.tally(verdicts) + " (over the rounds)")
    out.append(f"Raw google-benchmark JSON: {out_dir / 'raw'}; results: {out_dir / 'results.md'}, "
               f"{out_dir / 'results.json'}; peer load probes: {out_dir / 'probes.txt'}")
    print("\n".join(out))
    (out_dir / "results.md").write_text("\n".join(md) + "\n")

    result = {
        "date": stamp, "wall_s": round(wall, 1), "rounds": args.rounds, "quick": args.quick,
        "heavy_rounds": sorted(args.heavy_round_set), "peer_rounds": sorted(args.peer_round_set),
        "time": args.time, "machine": machine_lines(context, args), "context": context,
        "headroom": getattr(args, "headroom", None),
        "registry": registry.to_json(),
        "configs": [c.to_json() for c in configs],
        "skipped_peers": skipped,
        "ours_vs_peers": comparisons,
        "scenario_verdicts": scenario_verdicts,
        "runs": [r.to_json() for r in runs],
        "cells": [c.to_json() | {"note": coverage_note(c, {x.name: x for x in configs}[c.config], registry)}
                  for c in sorted(cells.values(), key=lambda c: (c.suite, c.ws, c.label))],
    }
    (out_dir / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(r.rc == 0 for r in runs) else 1


PAIRED_METHOD = (
    "One process: each contender (glibc, our allocators, jemalloc and mimalloc loaded beside "
    "glibc with their huge-page options) builds the suite's container from the same keys, then "
    "the contenders take turns with a batch of the suite's operation, round after round, the "
    "order rotating. ns = median over the rounds; vs glibc std = the median of the per-round "
    "ratios glibc/row, with their min-max and number of rounds; huge % = the arena's pages on huge "
    "pages (backing_of), else huge pages in what the build added to the process.")


def paired_report(args, registry, out_dir, record, data):
    """The paired run's tables and verdicts: printed, and appended to results.md."""
    out = ["", "Paired run (hugepage_bench --paired): " + PAIRED_METHOD]
    md = ["## Paired in one process", "", PAIRED_METHOD, ""]
    if record.get("cmd"):
        out.append("Command: " + " ".join(record["cmd"]))
        md += ["```", " ".join(record["cmd"]), "```", ""]
    if data is None:
        why = record.get("problem", "no JSON")
        out.append(f"no result ({why}; exit status {record.get('rc')}; see {record.get('log')})")
        md.append(f"No result: {why}.")
    else:
        cells, configs = collect_paired(data, registry)
        verdicts = targets.verdict_lines(registry, cells, configs, paired=True)
        for suite in registry.pairable():
            t = suite_table(cells, configs, suite, registry)
            if not t:
                continue
            title, headers, rows, align = t
            lines = [line for _, line in verdicts.get(suite, [])]
            out += ["", f"{suite} (paired): {title.split(': ', 1)[-1]}",
                    text_table(headers, rows, align)]
            out += ["Targets:"] + ["  " + line for line in lines] if lines else []
            md += [f"### {suite} (paired)", "", md_table(headers, rows, align), ""]
            md += ["Targets:", ""] + [f"- {line}" for line in lines] + [""] if lines else []
        line = targets.tally(verdicts)
        if line:
            out += ["", line + " (paired)"]
            md += [line + " (paired).", ""]
        record["cells"] = [c.to_json() for c in sorted(cells.values(),
                                                       key=lambda c: (c.suite, c.ws, c.label))]
    print("\n".join(out))
    results_md = out_dir / "results.md"
    if results_md.exists():
        results_md.write_text(results_md.read_text() + "\n".join(md) + "\n")
