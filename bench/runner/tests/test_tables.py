import unittest

from runner import stats, tables
from runner.execute import BASELINE
from runner.util import fmt_num

from . import fixtures

WS = 64 << 20


def summarized(cells):
    out = {(c.suite, c.label, c.ws): stats.summarize(c) for c in cells}
    for c in out.values():
        base = out.get((c.suite, BASELINE, c.ws))
        c.speedup = stats.ratio_summary(stats.paired_ratios(base, c)) if base else None
    return out


class Formatting(unittest.TestCase):
    def test_fmt_num_significant_digits(self):
        self.assertEqual(fmt_num(123.456), "123")
        self.assertEqual(fmt_num(1.23456), "1.23")
        self.assertEqual(fmt_num(0.0123456), "0.0123")
        self.assertEqual(fmt_num(0), "0")
        self.assertEqual(fmt_num(None), "-")

    def test_text_table_aligns_columns(self):
        text = tables.text_table(["name", "ns"], [["a", "1.5"], ["long name", "10"]], ["l", "r"])
        self.assertEqual(text.splitlines(), ["name        ns", "---------  ---",
                                             "a          1.5", "long name   10"])

    def test_md_table(self):
        text = tables.md_table(["name", "ns"], [["a", ""]], ["l", "r"])
        self.assertEqual(text.splitlines(), ["| name | ns |", "|:---|---:|", "| a |   |"])


class SuiteTable(unittest.TestCase):
    def setUp(self):
        self.reg = fixtures.registry()
        self.configs = fixtures.configs(self.reg)

    def table(self, cells):
        title, headers, rows, _ = tables.suite_table(summarized(cells), self.configs,
                                                     "Map_Lookup", self.reg)
        return title, headers, [dict(zip(headers, r)) for r in rows]

    def test_median_spread_and_paired_speedup(self):
        _, headers, rows = self.table([
            fixtures.cell("Map_Lookup", BASELINE, WS, "glibc", "std", {1: 100.0, 2: 120.0, 3: 90.0},
                          coverage_pct=0.0),
            fixtures.cell("Map_Lookup", "ours thp", WS, "ours thp", "thp", {1: 50.0, 2: 40.0},
                          coverage_pct=100.0)])
        self.assertEqual(headers[2], "ns/lookup")
        self.assertNotIn("p99 ns", headers)  # no tail cells: no tail columns
        std, thp = rows
        self.assertEqual((std["working set"], std["ns/lookup"], std["spread (min-max)"]),
                         ("64 MiB", "100", "90.0-120"))
        self.assertEqual((thp["working set"], thp["vs glibc std"], thp["vs std min-max"],
                          thp["pairs"], thp["huge %"], thp["n"]),
                         ("", "2.50x", "2.00-3.00", "2", "100.0", "2"))

    def test_tail_columns_beside_the_median(self):
        title, headers, rows = self.table([
            fixtures.cell("Map_Lookup", BASELINE, WS, "glibc", "std", {1: 100.0, 2: 100.0}),
            fixtures.cell("Map_Lookup", "ours thp", WS, "ours thp", "thp", {1: 50.0, 2: 50.0}),
            fixtures.cell("Map_LookupLatency", BASELINE, WS, "glibc", "std", {1: 9e3, 2: 9e3},
                          lat_p50_ns=210.0, lat_p99_ns=500.0, lat_p999_ns=700.0, timer_ns=18.0),
        ])
        i = headers.index("ns/lookup")
        self.assertEqual(headers[i + 1:i + 2], ["spread (min-max)"])
        for h in ("p50 ns", "p99 ns", "p99.9 ns"):
            self.assertIn(h, headers)
        self.assertLess(headers.index("ns/lookup"), headers.index("p50 ns"))
        std, thp = rows
        self.assertEqual((std["p50 ns"], std["p99 ns"], std["p99.9 ns"]), ("210", "500", "700"))
        self.assertEqual(thp["p99 ns"], "-")  # no tail measured for that row
        self.assertIn("Map_LookupLatency", title)
        self.assertIn("18.0 ns", title)  # the subtracted timer cost is stated

    def test_tail_is_median_over_rounds(self):
        cells = [fixtures.cell("Map_Lookup", BASELINE, WS, "glibc", "std", {1: 1.0, 2: 1.0, 3: 1.0}),
                 fixtures.cell("Map_LookupLatency", BASELINE, WS, "glibc", "std",
                               {1: 1.0, 2: 1.0, 3: 1.0}, lat_p99_ns=0.0)]
        for r, p99 in zip((1, 2, 3), (300.0, 900.0, 400.0)):
            cells[1].samples[r - 1]["counters"] = {"lat_p99_ns": p99}
        _, _, rows = self.table(cells)
        self.assertEqual(rows[0]["p99 ns"], "400")

    def test_skipped_row_says_why(self):
        c = fixtures.cell("Map_Lookup", "ours thp", WS, "ours thp", "thp", {})
        c.errors = ["hugetlb pool too small"]
        _, _, rows = self.table([c])
        self.assertEqual(rows[0]["note"], "skipped: hugetlb pool too small")

    def test_no_huge_pages_is_flagged(self):
        _, _, rows = self.table([fixtures.cell("Map_Lookup", "ours thp", WS, "ours thp", "thp",
                                               {1: 5.0}, coverage_pct=1.0)])
        self.assertEqual(rows[0]["note"], "no huge pages: misconfigured?")

    def test_decay_on_purpose_is_not_flagged(self):
        reg = fixtures.registry()
        reg.suites.append(fixtures.Registry.from_json({"schema": 2, "allocators": fixtures.ALL,
                                                       "suites": [fixtures.suite(
                                                           "Table_Decayed", 91,
                                                           decays_on_purpose=True)]}).suites[0])
        cells = summarized([fixtures.cell("Table_Decayed", "ours thp", WS, "ours thp", "thp",
                                          {1: 5.0}, coverage_pct=0.0)])
        _, headers, rows, _ = tables.suite_table(cells, self.configs, "Table_Decayed", reg)
        row = dict(zip(headers, rows[0]))
        self.assertEqual((row["huge %"], row["note"]), ("0.0", ""))


class BloatTable(unittest.TestCase):
    def test_resident_over_live(self):
        reg = fixtures.registry()
        cells = summarized([fixtures.cell("Bloat_Sparse", "ours thp", WS, "ours thp", "thp",
                                          {1: 1.0}, live_kib=2.0, resident_mib=64.0,
                                          container_mib=64.0, coverage_pct=100.0, rss_mib=70.0)])
        _, headers, rows, _ = tables.bloat_table(cells, fixtures.configs(reg))
        row = dict(zip(headers, rows[0]))
        self.assertEqual(row["resident / live"], "32768x")
        self.assertEqual(row["huge %"], "100.0")
        self.assertNotIn("note", headers)

    def test_purge_columns_and_memory_resident_before_the_build(self):
        reg = fixtures.registry()
        cells = summarized([
            fixtures.cell("Map_Purge", "ours thp", WS, "ours thp", "thp", {1: 1.0}, live_kib=1024.0,
                          resident_mib=1.2, bloat_x=1.2, built_live_mib=10.0,
                          built_resident_mib=10.2, cleared_resident_mib=2.0),
            fixtures.cell("Map_Purge", "jemalloc", WS, "jemalloc", "std", {1: 1.0},
                          resident_before_build=1.0)])
        title, headers, rows, _ = tables.bloat_table(cells, fixtures.configs(reg), "Map_Purge",
                                                     "a purge")
        self.assertEqual(title, "Map_Purge: a purge (medians over rounds)")
        ours, peer = (dict(zip(headers, r)) for r in rows)
        self.assertEqual(ours["resident / live"], "1.20x")
        self.assertEqual(ours["built: resident MiB"], "10.2")
        self.assertEqual(ours["after clear(): resident MiB"], "2.00")
        self.assertEqual(ours["note"], "")
        self.assertEqual(peer["resident / live"], "-")
        self.assertIn("not measurable", peer["note"])


if __name__ == "__main__":
    unittest.main()
