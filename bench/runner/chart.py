"""chart.png: the TLB cliff per configuration, its tail, and the speedup over glibc std."""

import math

from .execute import BASELINE
from .tables import coverage_note, label_order
from .util import MiB, short_size

STLB_ENTRIES = (1536, 2048)  # second-level TLB entries of recent x86 cores (Zen 2-4, Golden Cove)


def draw_chart(cells, configs, path, suites, registry=None):
    """chart.png: per chart suite, the median against the working set, its tail (p99 and p99.9 of
    the suite's tail suite, where measured) and the speedup over glibc std. Returns None, or why
    there is no chart."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    except ImportError:
        return "matplotlib not installed (apt-get install python3-matplotlib): no chart"
    suites = [s for s in suites if any(c.suite == s and c.samples for c in cells.values())]
    if not suites:
        return "no lookup rows to chart"
    by_name = {c.name: c for c in configs}
    labels = [l for l in label_order(configs)
              if any(c.label == l and c.suite in suites and c.samples for c in cells.values())]
    cmap = plt.get_cmap("tab10")
    colors = {l: cmap(i % 10) for i, l in enumerate(labels)}
    tails = {s: [t.name for t in registry.tails_of(s)] if registry else [] for s in suites}
    has_tail = any(c.suite in sum(tails.values(), []) and c.samples for c in cells.values())
    rows = 3 if has_tail else 2
    fig, axes = plt.subplots(rows, len(suites), figsize=(7.5 * len(suites) + 2.2, 9.5 + 4 * (rows - 2)),
                             squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2.5, 2] if has_tail else [3, 2]})
    for col, suite in enumerate(suites):
        ax, ax2 = axes[0][col], axes[rows - 1][col]
        axt = axes[1][col] if has_tail and tails[suite] else None
        if has_tail and not tails[suite]:
            axes[1][col].set_axis_off()
            axes[1][col].text(0.5, 0.5, f"{suite}: no tail suite", ha="center", va="center",
                              fontsize=9, color="gray", transform=axes[1][col].transAxes)
        sizes = sorted({c.ws for c in cells.values() if c.suite == suite})
        top = 0.0
        for label in labels:
            pts = sorted((c for c in cells.values()
                          if c.suite == suite and c.label == label and c.samples),
                         key=lambda c: c.ws)
            if not pts:
                continue
            config = by_name[pts[0].config]
            xs = [c.ws for c in pts]
            ys = [c.median_ns for c in pts]
            # Bars: interquartile range over rounds (min-max is in the tables; one preempted
            # round would otherwise set the scale of the whole panel).
            err = [[max(0.0, c.median_ns - c.q1_ns) for c in pts],
                   [max(0.0, c.q3_ns - c.median_ns) for c in pts]]
            top = max([top] + [max(c.q3_ns, c.median_ns) for c in pts])
            nohuge = [coverage_note(c, config).startswith("no huge") for c in pts]
            style = "--" if config.peer else "-"
            lw = 2.6 if label == BASELINE else 1.6
            name = label + ("  (no huge pages!)" if any(nohuge) else "")
            ax.errorbar(xs, ys, yerr=err, label=name, color=colors[label], linestyle=style,
                        linewidth=lw, marker="o" if not config.peer else "s", markersize=4,
                        capsize=3, elinewidth=1)
            tail = sorted((t for t in cells.values() if t.suite in tails[suite]
                           and t.label == label and t.samples), key=lambda t: t.ws)
            if axt is not None and tail:
                for key, dash, width in (("lat_p99_ns", style, 1.6), ("lat_p999_ns", ":", 1.0)):
                    pts_t = [(t.ws, t.counters[key]) for t in tail if key in t.counters]
                    axt.plot([x for x, _ in pts_t], [y for _, y in pts_t], color=colors[label],
                             linestyle=dash, linewidth=width,
                             marker="o" if not config.peer else "s", markersize=3)
            sp = [(c.ws, c.speedup["median"]) for c in pts if c.speedup]
            if sp and label != BASELINE:
                ax2.plot([x for x, _ in sp], [y for _, y in sp], color=colors[label],
                         linestyle=style, linewidth=1.6, marker="o" if not config.peer else "s",
                         markersize=4)
        lo, hi = min(sizes) / 1.6, max(sizes) * 1.6
        for a in [x for x in (ax, axt, ax2) if x is not None]:
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
        if axt is not None:
            axt.set_yscale("log")
            axt.set_ylabel("ns per lookup, one timed alone")
            axt.set_title(f"tail ({', '.join(tails[suite])}): p99 (lines as above) "
                          f"and p99.9 (dotted), timer cost subtracted", fontsize=10)
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
