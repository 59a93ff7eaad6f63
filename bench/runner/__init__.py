"""The hugepage benchmark runner: hugepage_bench under our allocators and the peers, side by side.

Modules, one job each, in the order data flows through them:

  registry   the suites, as `hugepage_bench --list --json` declares them (Suite, Registry)
  configs    the configurations (ours per allocator, the peer mallocs) and their load probes
  plan       which configuration runs which suites in which round, the paired run after the
             rounds, and the command line of each
  execute    running the binary and collecting its JSON into cells (Run), the rounds' rows and
             the paired rows (hugepage_bench --paired) alike
  stats      medians, quartiles, paired per-round ratios, ours-vs-peer comparisons
  targets    the verdict on each target the suites declare (the registry holds them)
  tables     text and Markdown tables from cells
  machine    the machine header, with the headroom (hugepage_bench --headroom)
  chart      chart.png (matplotlib, optional)
  report     tables, verdicts, results.md, results.json, chart for one output directory
  cli        the command line (bench/run.py and `python3 -m runner` call cli.main)

Python 3 standard library only, plus matplotlib for the chart.
"""
