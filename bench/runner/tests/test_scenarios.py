"""The scenario family in the runner: its tables, verdicts and targets on made-up cells, the
machine-wide settings of the THP-always configurations, and how --scenarios plans a run."""

import contextlib
import io
import os
import tempfile
import unittest

from runner import cli, configs, scenarios, stats, sysfs, targets
from runner.configs import Config
from runner.registry import Registry

from . import fixtures

WS = 64 << 20
SCENARIO_ALLOCS = ["std", "hugetlb_2m", "thp", "collapse"]


def registry():
    s = lambda name, order, allocs, tgts=(), **kw: fixtures.suite(
        name, order, table="scenario", allocators=allocs, peers="full", per_op="ms/run",
        time_unit="ms", real_time=True, own_process=True, targets=list(tgts), **kw)
    return Registry.from_json({"schema": 2, "allocators": fixtures.ALL, "latency_batch": 64,
                               "suites": [
        fixtures.suite("Map_Lookup", 10, quick=True, core=True, peers="core", chart=True),
        s("Scenario_Book", 200, ["std", "hugetlb_2m"]),
        s("Scenario_BookFragmented", 201, ["std", "hugetlb_2m"], [
            {"claim": "no stall", "paired": False, "of": "hugetlb_2m", "over": "",
             "counter": "vm_compact_stall", "at_least": False, "bound": 0, "slack_bytes": 0,
             "from_bytes": 0, "over_suite": ""},
            {"claim": "p99.9 within 1.2x", "paired": False, "of": "hugetlb_2m", "over": "",
             "counter": "lat_p999_ns", "at_least": False, "bound": 1.2, "slack_bytes": 0,
             "from_bytes": 0, "over_suite": "Scenario_Book"}]),
        s("Scenario_Fork", 203, ["std", "thp", "collapse"], [
            {"claim": "back within 1 s", "paired": False, "of": "collapse", "over": "",
             "counter": "recovery_ms_max", "at_least": False, "bound": 1000, "slack_bytes": 0,
             "from_bytes": 0, "over_suite": ""}]),
    ]})


def the_configs():
    return [Config("glibc", {}, ["std"], None, peer=False, expect_huge=False),
            Config("ours hugetlb_2m", {}, ["hugetlb_2m"], None, peer=False),
            Config("ours thp", {}, ["thp"], None, peer=False),
            Config("ours collapse", {}, ["collapse"], None, peer=False),
            Config("jemalloc", {"LD_PRELOAD": "/x/libjemalloc.so.2"}, ["std"], None, peer=True),
            Config("thp always", {}, ["std"], None, peer=True,
                   sysfs={sysfs.THP_ENABLED: "always"})]


def row(suite, config, allocator, what, **counters):
    """A cell of one round; `what` is the binary's label (the allocator the row ran on)."""
    label = {x.name: x for x in the_configs()}[config].row_label(allocator)
    cell = fixtures.cell(suite, label, WS, config, allocator, {1: 1e9}, **counters)
    cell.samples[0]["counters"]["label"] = what
    return cell


def cells_of(*cells):
    return {(c.suite, c.label, c.ws): stats.summarize(c) for c in cells}


BASE = dict(lat_p50_ns=800, lat_p99_ns=5000, lat_p999_ns=20000, lat_max_ns=90000,
            requests_per_s=100000, startup_ms=300, peak_rss_mib=80, steady_rss_mib=70,
            live_mib=64, rss_over_live=1.09, process_huge_pct=0, vm_compact_stall=0,
            vm_thp_split_pmd=0)


class Tables(unittest.TestCase):
    def test_one_table_of_latency_and_one_of_kernel_counters_per_working_set(self):
        cells = cells_of(
            row("Scenario_Book", "glibc", "std", "malloc", huge_pct=0, **BASE),
            row("Scenario_Book", "ours hugetlb_2m", "hugetlb_2m", "2 MiB pool",
                **dict(BASE, huge_pct=100, lat_p999_ns=15000, own_direct_compactions=0)))
        out = scenarios.scenario_tables(cells, the_configs(), "Scenario_Book", registry())
        self.assertEqual(len(out), 2)
        (_, heads, rows, _), (_, vm_heads, vm_rows, _) = out
        self.assertEqual([r[0] for r in rows], ["glibc std", "ours hugetlb_2m"])
        self.assertEqual(rows[1][heads.index("p99.9 us")], "15.0")
        self.assertEqual(rows[1][heads.index("huge %")], "100")
        self.assertEqual(rows[1][-1], "2 MiB pool")
        self.assertEqual(vm_heads[:3],
                         ["configuration", "own direct compactions", "compact_stall"])
        # The process's own count where the row has it, '-' where it could not be counted.
        self.assertEqual([r[1] for r in vm_rows], ["-", "0"])
        self.assertEqual(vm_rows[0][vm_heads.index("thp_split_pmd")], "0")
        self.assertEqual(vm_rows[0][vm_heads.index("thp_collapse_alloc")], "-")

    def test_a_skipped_row_says_why(self):
        c = row("Scenario_BookFragmented", "ours hugetlb_2m", "hugetlb_2m", "")
        c.samples, c.errors = [], ["fragment first failed: not fragmented"]
        out = scenarios.scenario_tables(cells_of(c), the_configs(), "Scenario_BookFragmented",
                                        registry())
        self.assertEqual(len(out), 1)  # no kernel table without a measured row
        self.assertEqual(out[0][2][0][-1], "skipped: fragment first failed: not fragmented")


def rounds_row(suite, config, allocator, what, by_round, failed_rounds=()):
    """A cell over several rounds: by_round {round: counters}; failed_rounds {round: reason}."""
    label = {x.name: x for x in the_configs()}[config].row_label(allocator)
    cell = fixtures.cell(suite, label, WS, config, allocator, {r: 1e9 for r in by_round})
    for smp in cell.samples:
        smp["counters"] = dict(by_round[smp["round"]], label=what)
    cell.errors = [f"FAILED: {why}" for why in dict(failed_rounds).values()]
    return cell


def p999(*us):
    """{round: counters} with these p99.9 figures (microseconds), one per round."""
    return {r: dict(BASE, lat_p999_ns=x * 1000) for r, x in enumerate(us, 1)}


class Failed(unittest.TestCase):
    def test_a_row_whose_child_was_killed_shows_failed_and_no_figure(self):
        c = row("Scenario_Fork", "jemalloc", "std", "")
        c.samples, c.errors = [], ["FAILED: 1 of 2 children did not do their work: child 1 "
                                   "killed by SIGBUS before it reported;"]
        cells = cells_of(c, row("Scenario_Fork", "ours collapse", "collapse", "upkeep",
                                **dict(BASE, recovery_ms_max=100, unrecovered_cycles=0)),
                         row("Scenario_Fork", "glibc", "std", "malloc", **BASE))
        (_, heads, rows, _), (_, _, vm_rows, _) = scenarios.scenario_tables(
            cells, the_configs(), "Scenario_Fork", registry())
        failed = next(r for r in rows if r[0] == "jemalloc")
        self.assertEqual(failed[-1], "FAILED: 1 of 2 children did not do their work: child 1 "
                                     "killed by SIGBUS before it reported;")
        self.assertEqual(set(failed[1:heads.index("n")]), {"-"})
        self.assertEqual([r[0] for r in vm_rows], ["glibc std", "ours collapse"])
        v = scenarios.verdict(cells, the_configs(), "Scenario_Fork", WS, registry())
        self.assertIn("FAILED rows (not compared): jemalloc FAILED: 1 of 2 children", v["line"])
        self.assertEqual(v["failed"], ["jemalloc"])

    def test_failed_in_one_round_of_three_is_failed_and_never_the_best(self):
        # The fastest p99.9 came from the rounds in which its child lived: still a failed row.
        cells = cells_of(
            rounds_row("Scenario_Book", "glibc", "std", "malloc", p999(30, 31, 32)),
            rounds_row("Scenario_Book", "ours hugetlb_2m", "hugetlb_2m", "pool", p999(20, 21, 22)),
            rounds_row("Scenario_Book", "jemalloc", "std", "malloc", p999(5, 6),
                       failed_rounds={3: "child 1 killed by SIGBUS"}))
        _, heads, rows, _ = scenarios.scenario_tables(cells, the_configs(), "Scenario_Book",
                                                      registry())[0]
        je = next(r for r in rows if r[0] == "jemalloc")
        self.assertEqual(je[-1], "FAILED in 1 of 3 rounds: child 1 killed by SIGBUS")
        v = scenarios.verdict(cells, the_configs(), "Scenario_Book", WS, registry())
        self.assertEqual(v["p999_standing"], "first")
        self.assertNotIn("jemalloc 5", v["line"])

    def test_ours_failed_is_no_verdict_and_says_so(self):
        c = row("Scenario_Book", "ours hugetlb_2m", "hugetlb_2m", "")
        c.samples, c.errors = [], ["FAILED: its process was killed by SIGBUS before it wrote its "
                                   "results (round 1; wrote no JSON)"]
        cells = cells_of(c, row("Scenario_Book", "glibc", "std", "malloc", **BASE))
        v = scenarios.verdict(cells, the_configs(), "Scenario_Book", WS, registry())
        self.assertFalse(v["computed"])
        self.assertIn("not computed (ours FAILED); ours hugetlb_2m FAILED: its process was "
                      "killed by SIGBUS", v["line"])


class Spread(unittest.TestCase):
    def standing(self, ours, peer):
        cells = cells_of(
            rounds_row("Scenario_Book", "ours hugetlb_2m", "hugetlb_2m", "pool", p999(*ours)),
            rounds_row("Scenario_Book", "jemalloc", "std", "malloc", p999(*peer)))
        return scenarios.verdict(cells, the_configs(), "Scenario_Book", WS, registry())

    def test_first_only_when_its_worst_round_beats_every_rivals_best(self):
        self.assertEqual(self.standing([10, 11, 12], [13, 20, 30])["p999_standing"], "first")
        v = self.standing([10, 11, 14], [13, 20, 30])
        self.assertEqual(v["p999_standing"], "tied within spread (with jemalloc)")
        self.assertIn("ours p99.9 tied within spread (with jemalloc)", v["line"])

    def test_behind_when_its_best_round_is_worse_than_a_rivals_worst(self):
        self.assertEqual(self.standing([40, 41, 45], [13, 20, 30])["p999_standing"],
                         "behind jemalloc")
        self.assertEqual(self.standing([25, 41, 45], [13, 20, 30])["p999_standing"],
                         "tied within spread (with jemalloc)")

    def test_one_round_says_it_has_no_spread(self):
        self.assertEqual(self.standing([10], [13])["p999_standing"],
                         "first (1 round: no spread)")

    def test_cells_show_the_median_and_the_range_over_the_rounds(self):
        cells = cells_of(
            rounds_row("Scenario_Book", "ours hugetlb_2m", "hugetlb_2m", "pool", p999(10, 12, 30)),
            rounds_row("Scenario_Book", "jemalloc", "std", "malloc", p999(13, 13, 13)))
        title, heads, rows, _ = scenarios.scenario_tables(cells, the_configs(), "Scenario_Book",
                                                          registry())[0]
        self.assertEqual(rows[0][heads.index("p99.9 us")], "12.0 (10.0-30.0)")
        self.assertEqual(rows[1][heads.index("p99.9 us")], "13.0")  # every round alike
        self.assertIn("(min-max) over the 3 rounds", title)


class Verdict(unittest.TestCase):
    def test_ours_against_the_best_peer_on_p999_and_rss_with_the_kernel_counters(self):
        cells = cells_of(
            row("Scenario_Book", "glibc", "std", "malloc", **BASE),
            row("Scenario_Book", "ours hugetlb_2m", "hugetlb_2m", "pool",
                **dict(BASE, lat_p999_ns=10000, rss_over_live=1.02, own_direct_compactions=0,
                       vm_compact_stall=1)),
            row("Scenario_Book", "jemalloc", "std", "malloc",
                **dict(BASE, lat_p999_ns=40000, rss_over_live=1.5, vm_thp_split_pmd=7)),
            row("Scenario_Book", "thp always", "std", "malloc",
                **dict(BASE, lat_p999_ns=25000, rss_over_live=1.9, vm_compact_stall=3)))
        v = scenarios.verdict(cells, the_configs(), "Scenario_Book", WS, registry())
        self.assertTrue(v["computed"])
        self.assertEqual((v["ours"], v["best_peer_p999"], v["best_peer_rss"]),
                         ("ours hugetlb_2m", "thp always", "jemalloc"))
        self.assertIn("p99.9 ours hugetlb_2m 10.0 us vs best peer thp always 25.0 us (ratio 0.40)",
                      v["line"])
        self.assertIn("rss over live ours hugetlb_2m 1.02 vs best peer jemalloc 1.50", v["line"])
        self.assertIn("glibc std p99.9 20.0 us", v["line"])
        self.assertIn("compact_stall up to +3 (thp always)", v["line"])
        # Ours: its own process's count first, then the machine-wide counter.
        self.assertIn("ours hugetlb_2m own direct compactions +0, compact_stall +1", v["line"])
        self.assertIn("thp_split_pmd up to +7 (jemalloc)", v["line"])

    def test_ours_is_the_row_the_targets_name_not_the_fastest(self):
        cells = cells_of(
            row("Scenario_Fork", "glibc", "std", "malloc",
                **dict(BASE, recovery_ms_max=1500, unrecovered_cycles=2)),
            row("Scenario_Fork", "ours thp", "thp", "no upkeep",
                **dict(BASE, lat_p999_ns=1000, recovery_ms_max=1500, unrecovered_cycles=2)),
            row("Scenario_Fork", "ours collapse", "collapse", "upkeep",
                **dict(BASE, lat_p999_ns=30000, recovery_ms_max=120, unrecovered_cycles=0)))
        v = scenarios.verdict(cells, the_configs(), "Scenario_Fork", WS, registry())
        self.assertEqual(v["ours"], "ours collapse")
        self.assertIn("(no peer measured) glibc std 20.0 us", v["line"])
        self.assertIn("ours collapse 120 ms worst (0 not back), (no peer measured) glibc std "
                      "1500 ms (2 not back)", v["line"])

    def test_not_computed_without_a_row_of_ours(self):
        cells = cells_of(row("Scenario_Book", "glibc", "std", "malloc", **BASE))
        v = scenarios.verdict(cells, the_configs(), "Scenario_Book", WS, registry())
        self.assertFalse(v["computed"])
        self.assertIn("not computed (no row of ours measured)", v["line"])


class Targets(unittest.TestCase):
    def judge(self, cells, suite, index):
        t = registry().get(suite).targets[index]
        return targets.judge(t, cells, the_configs(), suite, WS)

    def test_a_row_over_its_twin_in_another_suite(self):
        cells = cells_of(
            row("Scenario_Book", "ours hugetlb_2m", "hugetlb_2m", "", **BASE),
            row("Scenario_BookFragmented", "ours hugetlb_2m", "hugetlb_2m", "",
                **dict(BASE, lat_p999_ns=30000, vm_compact_stall=2)))
        status, text = self.judge(cells, "Scenario_BookFragmented", 1)
        self.assertEqual(status, targets.MISSED)
        self.assertIn("ratio 1.50", text)
        self.assertEqual(self.judge(cells, "Scenario_BookFragmented", 0)[0], targets.MISSED)

    def test_a_missing_twin_is_not_measured(self):
        cells = cells_of(row("Scenario_BookFragmented", "ours hugetlb_2m", "hugetlb_2m", "",
                             **BASE))
        status, text = self.judge(cells, "Scenario_BookFragmented", 1)
        self.assertEqual(status, targets.NOT_MEASURED)
        self.assertIn("Scenario_Book: hugetlb_2m not measured", text)
        self.assertEqual(self.judge(cells, "Scenario_BookFragmented", 0)[0], targets.MET)


class Sysfs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.mode = os.path.join(self.dir.name, "enabled")
        self.sleep = os.path.join(self.dir.name, "scan_sleep_millisecs")
        with open(self.mode, "w") as f:
            f.write("always [madvise] never\n")
        with open(self.sleep, "w") as f:
            f.write("10000\n")

    def tearDown(self):
        self.dir.cleanup()

    def read(self, path):
        with open(path) as f:
            return f.read()

    def test_written_for_the_block_and_restored_after(self):
        notes = []
        with sysfs.applied({self.mode: "always", self.sleep: "100"}, notes.append):
            self.assertEqual((self.read(self.mode), self.read(self.sleep)), ("always", "100"))
        self.assertEqual((self.read(self.mode), self.read(self.sleep)), ("madvise", "10000"))
        self.assertEqual(len(notes), 4)
        self.assertIn("restored to madvise", notes[-1])

    def test_restored_when_the_block_raises(self):
        with self.assertRaises(KeyboardInterrupt):
            with sysfs.applied({self.mode: "always"}):
                raise KeyboardInterrupt
        self.assertEqual(self.read(self.mode), "madvise")

    def test_a_failed_write_puts_back_what_was_written_before_it(self):
        missing = os.path.join(self.dir.name, "no", "such")
        with self.assertRaisesRegex(sysfs.SettingError, "cannot set .*/no/such to 1"):
            with sysfs.applied({self.mode: "always", missing: "1"}):
                self.fail("the block ran")
        self.assertEqual(self.read(self.mode), "madvise")

    def test_thp_always_configs_or_the_reason_they_are_left_out(self):
        reg = registry()
        made = []
        skipped = configs.thp_always_configs(made, ["Scenario_Book", configs.SPARSE_IDLE], reg,
                                             why_not=lambda s: "")
        self.assertEqual(skipped, [])
        self.assertEqual([c.name for c in made], ["thp always", "thp always fast khugepaged"])
        self.assertEqual(made[0].sysfs, {sysfs.THP_ENABLED: "always"})
        self.assertEqual(made[1].suites, [configs.SPARSE_IDLE])
        self.assertEqual(made[1].sysfs[sysfs.KHUGEPAGED_SLEEP], "100")
        made = []
        skipped = configs.thp_always_configs(made, ["Scenario_Book"], reg,
                                             why_not=lambda s: "needs root")
        self.assertEqual(made, [])
        self.assertEqual(skipped, ["thp always: needs root"])  # no SparseIdle: no fast config


class Planning(unittest.TestCase):
    def test_a_default_run_leaves_the_scenarios_out(self):
        args = cli.parse_args([])
        cli.resolve_suites(args, registry())
        self.assertEqual(args.suites, ["Map_Lookup"])
        self.assertNotIn("Scenario_Book", args.peer_suites)

    def test_a_full_scenario_run_interleaves_three_rounds(self):
        args = cli.parse_args(["--scenarios"])
        self.assertEqual((args.rounds, args.heavy_round_set, args.peer_round_set),
                         (3, {1, 2, 3}, {1, 2, 3}))
        self.assertEqual(cli.parse_args(["--scenarios", "--rounds", "5"]).rounds, 5)

    def test_scenarios_run_the_scenarios_in_one_round_without_paired_or_headroom(self):
        args = cli.parse_args(["--scenarios", "--quick"])
        cli.resolve_suites(args, registry())
        self.assertEqual(args.suites, ["Scenario_Book", "Scenario_BookFragmented",
                                       "Scenario_Fork"])
        # --quick (CI): one round
        self.assertEqual((args.rounds, args.heavy_round_set, args.no_headroom), (1, {1}, True))
        from runner.plan import paired_plan
        self.assertEqual(paired_plan(args, registry())[-1], "--scenarios")

    def test_scenarios_refuse_a_suite_that_is_not_one(self):
        args = cli.parse_args(["--scenarios", "--suites=Map_Lookup"])
        with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as e:
            cli.resolve_suites(args, registry())
        self.assertEqual(e.exception.code, 2)
        self.assertIn("--scenarios runs scenario suites only, not Map_Lookup", err.getvalue())


if __name__ == "__main__":
    unittest.main()
