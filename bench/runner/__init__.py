"""The hugepage benchmark runner: hugepage_bench under our allocators and the peers, side by side.

Modules, one job each, in the order data flows through them:

  registry   the suites, as `hugepage_bench --list --json` declares them (Suite, Registry)
  configs    the configurations (ours per allocator, the peer mallocs) and their load probes
  plan       which configuration runs which suites in which round, and its command line
  execute    running the binary and collecting its JSON into cells (Run)
  stats      medians, quartiles, paired per-round ratios, ours-vs-peer comparisons
  tables     text and Markdown tables from cells
  machine    the machine header
  chart      chart.png (matplotlib, optional)
  report     tables, results.md, results.json, chart for one output directory
  paired     the paired node comparison after the rounds (arena_bench BM_Paired_*, one process):
             its plan, run, tables and a verdict per node-arena target (paired-nodes.md)
  cli        the command line (bench/run.py and `python3 -m runner` call cli.main)

Python 3 standard library only, plus matplotlib for the chart.
"""
