"""The paired run (hugepage_bench --paired) through the runner's one path: its plan, its command,
its JSON into cells, the targets the suites declare judged on them, and the step after the
rounds."""

import io
import json
import os
import shlex
import stat
import tempfile
import unittest
import unittest.mock
from contextlib import redirect_stdout
from pathlib import Path

from runner import cli, execute, plan, targets
from runner.registry import Registry

from . import fixtures

HERE = Path(__file__).resolve().parent
# Hand-written hugepage_bench --paired output: StdMap_Lookup and StdMap_Churn at 1 GiB with every
# contender, StdUnorderedMap_Lookup with hugetlb_1g and mimalloc left out (the label says why),
# NodeHashMap_Lookup failed (SkipWithError).
FIXTURE = HERE / "paired.json"
# The node suites and FlatHashMap_Lookup as `hugepage_bench --list --json` declares them, with
# their contenders and targets.
REGISTRY = HERE / "registry-paired.json"
GiB = 1 << 30
MiB = 1 << 20


def registry():
    return Registry.from_json(json.loads(REGISTRY.read_text()))


def load():
    return json.loads(FIXTURE.read_text())


def verdicts(data=None):
    cells, configs = execute.collect_paired(data or load(), registry())
    return {suite: {line.split(": ", 2)[1].split(" (")[0]: (status, line)
                    for status, line in lines}
            for suite, lines in targets.verdict_lines(registry(), cells, configs, True).items()}


class Collect(unittest.TestCase):
    def test_cells_per_contender_with_their_rounds_and_build(self):
        cells, configs = execute.collect_paired(load(), registry())
        c = cells[("StdMap_Lookup", "ours thp", GiB)]
        self.assertEqual([s["ns"] for s in c.samples], [2130, 2150, 2100])
        self.assertEqual((c.n, c.median_ns, c.counters["build_ns"], c.counters["coverage_pct"]),
                         (3, 2130, 1540, 100.0))
        self.assertAlmostEqual(c.speedup["median"], 2900 / 2130)  # glibc/row, paired per round
        self.assertEqual(cells[("StdMap_Lookup", "ours pmr_pool", GiB)].counters["build_ns"],
                         1880)
        self.assertEqual(sorted(c.name for c in configs if c.peer), ["jemalloc", "mimalloc"])

    def test_left_out_reasons_keep_their_semicolons(self):
        cells, _ = execute.collect_paired(load(), registry())
        self.assertEqual(cells[("StdUnorderedMap_Lookup", "ours hugetlb_1g", GiB)].errors,
                         ["pool_exhausted: no free 1 GiB page; the pool has 0 of 2"])
        self.assertEqual(cells[("StdUnorderedMap_Lookup", "mimalloc", GiB)].errors,
                         ["libmimalloc.so.2: cannot open shared object file: No such file or "
                          "directory"])
        self.assertEqual(execute.left_out("", ["std"]), {})

    def test_failed_row_fails_every_contender(self):
        cells, _ = execute.collect_paired(load(), registry())
        failed = [c for c in cells.values() if c.suite == "NodeHashMap_Lookup"]
        self.assertEqual(len(failed), 6)
        self.assertTrue(all(not c.samples and c.errors[0].startswith("no contender could be")
                            for c in failed))

    def test_rounds_rows_ignore_paired_rows(self):
        run = execute.Run(1, "glibc", [], {}, 0, 1.0, "raw/x.json", load())
        self.assertEqual(execute.collect([run], fixtures.configs(fixtures.registry()), "auto"), {})


class Targets(unittest.TestCase):
    def test_met_and_missed(self):
        got = verdicts()
        self.assertEqual({k: s for k, (s, _) in got["StdMap_Lookup"].items()}, {
            "lookup >= 1.3x glibc": "met",
            "lookup": "met",
            "build": "met",
            "arena RSS after build <= 1.10x live + one 2 MiB page": "met",
            "arena over THP": "met",
            "arena over 1 GiB pages": "met"})
        status, line = got["StdMap_Churn"]["churn"]  # the pmr pool's is the last churn target
        self.assertEqual(status, "missed")
        self.assertIn("pmr_pool/thp 0.97 (0.97-0.97, n=3), in every round", line)
        self.assertIn("ours hugetlb_1g/mimalloc 0.986 (0.981-1.005, n=3)",
                      got["StdMap_Lookup"]["lookup"][1])

    def test_missing_contender_is_never_a_pass(self):
        got = verdicts()["StdUnorderedMap_Lookup"]
        status, line = got["lookup"]
        # thp/jemalloc is 0.98, but mimalloc, which may be the best peer, was left out.
        self.assertEqual(status, "not measured")
        self.assertIn("mimalloc not measured (libmimalloc.so.2: cannot open", line)
        status, line = got["lookup >= 1.3x glibc"]
        self.assertEqual(status, "missed")
        self.assertIn("1.26 (1.22-1.86, n=3), within the noise", line)
        self.assertEqual(got["arena over THP"][0], "missed")
        status, line = got["arena over 1 GiB pages"]
        self.assertEqual(status, "not measured")
        self.assertIn("hugetlb_1g not measured (pool_exhausted", line)

    def test_missing_peer_still_misses_when_ours_is_slower_than_the_other(self):
        data = load()
        row = next(b for b in data["benchmarks"] if "StdUnorderedMap" in b["name"])
        for r in (1, 2, 3):
            row[f"ns_jemalloc_r{r}"] = row[f"ns_thp_r{r}"] / 1.05
        self.assertEqual(verdicts(data)["StdUnorderedMap_Lookup"]["lookup"][0], "missed")

    def test_failed_row_is_not_measured(self):
        got = verdicts()["NodeHashMap_Lookup"]
        self.assertEqual({s for s, _ in got.values()}, {"not measured"})
        self.assertIn("std not measured (no contender could be built",
                      got["lookup >= 1.3x glibc"][1])

    def test_lookup_targets_not_judged_below_their_size(self):
        data = load()
        for b in data["benchmarks"]:
            b["name"] = b["name"].replace(f"/{GiB}/", f"/{64 * MiB}/")
        got = verdicts(data)["StdMap_Lookup"]
        self.assertEqual((got["lookup >= 1.3x glibc"][0], got["lookup"][0]),
                         ("not judged", "not judged"))
        self.assertIn("the target applies from 1 GiB", got["lookup"][1])
        self.assertEqual(got["build"][0], "met")  # the others apply at every size

    def test_rss_bound_counts_one_page_per_size_class(self):
        target = next(t for t in registry().get("StdMap_Lookup").targets
                      if t["counter"] == "rss_over_live")
        cells, configs = execute.collect_paired(load(), registry())
        thp = cells[("StdMap_Lookup", "ours thp", GiB)]
        thp.counters["container_mib"] = 64.0
        thp.counters["rss_over_live"] = 1.13  # bound 1.10 + 2/64 = 1.13125
        judge = lambda: targets.judge(target, cells, configs, "StdMap_Lookup", GiB)
        self.assertEqual(judge()[0], "met")
        thp.counters["rss_over_live"] = 1.14
        self.assertEqual(judge()[0], "missed")
        del thp.counters["rss_over_live"]
        self.assertEqual(judge(), ("not measured", "thp has no rss_over_live"))

    def test_ours_over_best_peer_over_the_rounds(self):
        """The rounds' target (paired False) judges the cells of separate processes."""
        reg = registry()
        target = next(t for t in reg.get("FlatHashMap_Lookup").targets if not t["paired"])
        configs = fixtures.configs(fixtures.registry())
        ws = 256 * MiB
        cells = {}
        for c in (fixtures.cell("FlatHashMap_Lookup", "glibc std", ws, "glibc", "std",
                                {1: 100.0, 2: 100.0}),
                  fixtures.cell("FlatHashMap_Lookup", "ours thp", ws, "ours thp", "thp",
                                {1: 52.0, 2: 53.0}),
                  fixtures.cell("FlatHashMap_Lookup", "jemalloc", ws, "jemalloc", "std",
                                {1: 50.0, 2: 50.0})):
            cells[(c.suite, c.label, c.ws)] = c
        from runner import stats
        for c in cells.values():
            stats.summarize(c)
            c.speedup = stats.ratio_summary(stats.paired_ratios(
                cells[("FlatHashMap_Lookup", "glibc std", ws)], c))
        status, detail = targets.judge(target, cells, configs, "FlatHashMap_Lookup", ws)
        self.assertEqual(status, "missed")  # 1.05 > 1.02 in every round
        self.assertIn("ours thp/jemalloc 1.050 (1.040-1.060, n=2), in every round", detail)
        self.assertEqual(targets.judge(target, cells, configs, "FlatHashMap_Lookup", 64 * MiB)[0],
                         "not measured")


class Plan(unittest.TestCase):
    def args(self, *argv):
        return cli.parse_args(list(argv))

    def test_rule(self):
        reg = registry()
        nodes = ["StdMap_Lookup", "StdMap_Churn", "StdUnorderedMap_Lookup", "NodeHashMap_Lookup"]
        p = lambda *a: plan.paired_plan(self.args(*a), reg)
        self.assertEqual(p(), (nodes, GiB, 15, 60, ""))
        self.assertEqual(p("--quick"), (nodes, 64 * MiB, 3, 0, ""))
        self.assertEqual(p("--no-paired")[-1], "--no-paired")
        self.assertEqual(p("--sizes", "4M,256M")[1], 256 * MiB)
        suites, *_, why = p("--sizes", "4M")
        self.assertIsNone(suites)
        self.assertIn("below the paired suites' smallest size (64 MiB)", why)
        self.assertEqual(p("--suites", "FlatHashMap_Lookup")[-1],
                         "--suites names no suite with a paired mode (hugepage_bench --list)")
        self.assertEqual(p("--suites", "FlatHashMap_Lookup,StdMap_Churn")[0], ["StdMap_Churn"])
        self.assertEqual(p("--quick", "--sizes", "1G", "--paired-rounds", "5")[1:3], (GiB, 5))
        self.assertEqual(p("--paired-size", "1.5G")[1], 3 * GiB // 2)

    def test_bad_flags(self):
        for argv in (["--paired-size", "0"], ["--paired-size", "1X"], ["--paired-rounds", "0"],
                     ["--sizes", "4M,1e3"]):
            with self.assertRaises(SystemExit), redirect_stdout(io.StringIO()), \
                    unittest.mock.patch("sys.stderr", io.StringIO()):
                self.args(*argv)

    def test_command(self):
        a = self.args("--cpu", "1")
        config = fixtures.configs(fixtures.registry())[0]
        cmd = plan.bench_command(a, config, "raw/paired.json", ["StdMap_Lookup"], bench="./hb",
                                 size=GiB, paired=(15, 60))
        self.assertEqual(cmd[:6], ["./hb", "--paired", "--rounds=15", "--round-seconds=60",
                                   "--sizes=1G", "--suites=StdMap_Lookup"])
        self.assertNotIn("--allocators", " ".join(cmd))
        self.assertIn("--cpu=1", cmd)
        self.assertIn("--benchmark_out=raw/paired.json", cmd)


class Step(unittest.TestCase):
    @staticmethod
    def fake(d, body):
        fake = d / "fake_bench"
        fake.write_text("#!/bin/sh\n" + body)
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        return fake

    def test_step_after_the_rounds(self):
        """cli.paired_step: runs the binary with --paired from the output directory under plain
        glibc, reports into results.md, records itself in results.json; --no-paired is recorded
        as skipped, a failure is exit status 1 and an earlier run's JSON is never reported."""
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            fixture = shlex.quote(str(FIXTURE))
            fake = self.fake(d, "for a in \"$@\"; do case \"$a\" in --benchmark_out=*) "
                                f"cp {fixture} \"${{a#--benchmark_out=}}\";; esac; done\n"
                                "echo \"MALLOC_CONF=${MALLOC_CONF:-unset}\"\n")
            out = d / "out"
            out.mkdir()
            (out / "results.json").write_text('{"rounds": 2}')
            (out / "results.md").write_text("# results\n")
            quiet = lambda: (redirect_stdout(io.StringIO()),
                             unittest.mock.patch("sys.stderr", io.StringIO()))
            a, b = quiet()
            with a as printed, b, unittest.mock.patch.dict(os.environ, {"MALLOC_CONF": "junk"}):
                rc = cli.paired_step(cli.parse_args(["--quick", "--bench", str(fake)]),
                                     registry(), out)
            self.assertEqual(rc, 0)
            saved = json.loads((out / "results.json").read_text())["paired"]
            self.assertEqual((saved["rc"], saved["size"], saved["rounds"], saved["json"]),
                             (0, 64 * MiB, 3, "raw/paired.json"))
            self.assertEqual(saved["cmd"][:4], ["../fake_bench", "--paired", "--rounds=3",
                                                "--sizes=64M"])
            self.assertTrue(saved["cells"])
            self.assertIn("MALLOC_CONF=unset", (out / "logs" / "paired.log").read_text())
            md = (out / "results.md").read_text()
            self.assertIn("### StdMap_Lookup (paired)", md)
            self.assertIn("- [missed] 1 GiB: churn: no slower than the pmr pool", md)
            self.assertIn("Targets: 9 met, 5 missed, 9 not measured (paired)",
                          printed.getvalue())
            a, b = quiet()
            with a, b:
                rc = cli.paired_step(cli.parse_args(["--no-paired"]), registry(), out)
            self.assertEqual(rc, 0)
            self.assertEqual(json.loads((out / "results.json").read_text())["paired"],
                             {"skipped": "--no-paired"})
            fake.write_text("#!/bin/sh\necho broken\nexit 3\n")
            a, b = quiet()
            with a, b:
                rc = cli.paired_step(cli.parse_args(["--bench", str(fake)]), registry(), out)
            self.assertEqual(rc, 1)
            self.assertEqual(json.loads((out / "results.json").read_text())["paired"]["problem"],
                             "wrote no JSON")


if __name__ == "__main__":
    unittest.main()
