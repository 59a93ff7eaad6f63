import math
import unittest

from runner import stats
from runner.execute import BASELINE

from . import fixtures


class MedianAndQuartiles(unittest.TestCase):
    def test_median_skips_missing_values(self):
        self.assertEqual(stats.median([3.0, None, 1.0, math.nan, 2.0]), 2.0)
        self.assertIsNone(stats.median([None, math.nan]))

    def test_quartiles_inclusive(self):
        self.assertEqual(stats.quartiles([1.0, 2.0, 3.0, 4.0, 5.0]), (2.0, 4.0))
        self.assertEqual(stats.quartiles([7.0]), (7.0, 7.0))
        self.assertEqual(stats.quartiles([]), (None, None))


class PairedRatios(unittest.TestCase):
    def test_pairs_only_rounds_where_both_ran(self):
        num = fixtures.cell("S", "a", 1, "c", "std", {1: 10.0, 2: 12.0, 3: 9.0})
        den = fixtures.cell("S", "b", 1, "c", "thp", {1: 5.0, 3: 3.0, 4: 1.0})
        self.assertEqual(stats.paired_ratios(num, den), [(1, 2.0), (3, 3.0)])

    def test_summary_of_ratios(self):
        s = stats.ratio_summary([(1, 2.0), (2, 1.0), (3, 4.0)])
        self.assertEqual((s["median"], s["min"], s["max"], s["n"]), (2.0, 1.0, 4.0, 3))
        self.assertEqual(s["pairs"][2], {"round": 3, "ratio": 4.0})
        self.assertIsNone(stats.ratio_summary([]))

    def test_paired_median_differs_from_ratio_of_medians(self):
        # Drift that hits both rows alike cancels in the paired ratio.
        base = fixtures.cell("S", "a", 1, "c", "std", {1: 10.0, 2: 20.0, 3: 30.0})
        row = fixtures.cell("S", "b", 1, "c", "thp", {1: 5.0, 2: 10.0, 3: 15.0})
        self.assertEqual(stats.ratio_summary(stats.paired_ratios(base, row))["median"], 2.0)


class Summarize(unittest.TestCase):
    def test_summary_fields(self):
        c = fixtures.cell("S", "a", 1, "c", "std", {1: 4.0, 2: 1.0, 3: 3.0, 4: 2.0},
                          coverage_pct=100.0, lat_p99_ns=50.0)
        c.samples[1]["counters"]["coverage_pct"] = 40.0
        stats.summarize(c)
        self.assertEqual((c.n, c.median_ns, c.min_ns, c.max_ns), (4, 2.5, 1.0, 4.0))
        self.assertEqual((c.q1_ns, c.q3_ns), (1.75, 3.25))
        self.assertEqual(c.coverage_min, 40.0)
        self.assertEqual(c.counters["coverage_pct"], 100.0)
        self.assertEqual(c.counters["lat_p99_ns"], 50.0)

    def test_no_samples(self):
        c = stats.summarize(fixtures.cell("S", "a", 1, "c", "std", {}))
        self.assertEqual(c.n, 0)
        self.assertIsNone(c.median_ns)


class CompareWithPeers(unittest.TestCase):
    def setUp(self):
        reg = fixtures.registry()
        self.configs = fixtures.configs(reg)
        ws = 64 << 20
        cells = [fixtures.cell("Map_Lookup", BASELINE, ws, "glibc", "std", {1: 100.0, 2: 110.0}),
                 fixtures.cell("Map_Lookup", "ours thp", ws, "ours thp", "thp", {1: 50.0, 2: 55.0}),
                 fixtures.cell("Map_Lookup", "jemalloc", ws, "jemalloc", "std", {1: 60.0, 2: 50.0})]
        self.cells = {(c.suite, c.label, c.ws): stats.summarize(c) for c in cells}
        for c in self.cells.values():
            base = self.cells[("Map_Lookup", BASELINE, ws)]
            c.speedup = stats.ratio_summary(stats.paired_ratios(base, c))

    def test_best_of_ours_against_each_peer(self):
        (cmp,) = stats.compare_with_peers(self.cells, self.configs, "Map_Lookup")
        self.assertEqual(cmp["ours_allocator"], "thp")
        self.assertEqual(cmp["vs_glibc_std"]["median"], 2.0)
        self.assertEqual(cmp["best_peer"], "jemalloc")
        r = cmp["peers"][0]["ours_over_peer"]
        self.assertAlmostEqual(r["min"], 50.0 / 60.0)
        self.assertAlmostEqual(r["max"], 55.0 / 50.0)


if __name__ == "__main__":
    unittest.main()
