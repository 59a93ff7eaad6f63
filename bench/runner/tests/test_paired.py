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

from runner import cli, paired

from . import fixtures

# Hand-written arena_bench output: StdMap at 1 GiB with every contender, StdUnorderedMap with
# arena_1g and mimalloc left out (the label says why), NodeHashMap failed (SkipWithError).
FIXTURE = Path(__file__).resolve().parent / "paired-nodes.json"
MiB = 1 << 20


def load():
    return json.loads(FIXTURE.read_text())


def row(data, container):
    return next(r for r in paired.rows(data) if r["container"] == container)


def statuses(r):
    """{first words of the target: status}."""
    out = {}
    for target, status, _ in paired.verdicts(r):
        out[target.split(":")[0].split(" (")[0]] = status
    return out


class Rows(unittest.TestCase):
    def test_rows_elements_and_contenders(self):
        found = paired.rows(load())
        self.assertEqual([(r["container"], r["elements"]) for r in found],
                         [("StdMap", 22369621), ("StdUnorderedMap", 33554432),
                          ("NodeHashMap", 33554432)])
        self.assertEqual(paired.contenders(found[0]),
                         ["std", "pmr", "jemalloc", "mimalloc", "arena", "arena_1g"])
        self.assertEqual(paired.contenders(found[1]), ["std", "pmr", "jemalloc", "arena"])
        self.assertEqual(found[2]["error"], "the arena over THP could not be built")

    def test_left_out_reasons_keep_their_semicolons(self):
        r = row(load(), "StdUnorderedMap")
        self.assertEqual(r["left_out"], {
            "arena_1g": "pool_exhausted: no free 1 GiB page; the pool has 0 of 2",
            "mimalloc": "libmimalloc.so.2: cannot open shared object file: No such file or "
                        "directory"})
        self.assertEqual(paired.left_out(""), {})


class BestOfOursOverBestPeer(unittest.TestCase):
    def test_best_peer_is_the_one_ours_does_worst_against(self):
        # arena: 0.99 vs jemalloc, 1.01 vs mimalloc -> 1.01; arena_1g: 0.97 and 0.99 -> 0.99.
        ours, peer, r = paired.best_of_ours_over_best_peer(row(load(), "StdMap"))
        self.assertEqual((ours, peer), ("arena_1g", "mimalloc"))
        self.assertEqual((r["median"], r["min"], r["max"]), (0.99, 0.95, 1.02))

    def test_only_the_pairs_measured(self):
        ours, peer, r = paired.best_of_ours_over_best_peer(row(load(), "StdUnorderedMap"))
        self.assertEqual((ours, peer, r["median"]), ("arena", "jemalloc", 0.98))
        self.assertIsNone(paired.best_of_ours_over_best_peer(row(load(), "NodeHashMap")))


class Verdicts(unittest.TestCase):
    def test_met_and_missed(self):
        self.assertEqual(statuses(row(load(), "StdMap")), {
            "lookup >= 1.3x glibc": "met",
            "lookup": "met",
            "build": "met",
            "churn": "missed",  # the pmr pool's churn is faster in the paired rounds (0.97)
            "arena RSS after build <= 1.10x live + 1 x 2 MiB": "met",
            "arena coverage >= 99% huge": "met"})
        details = {t: d for t, _, d in paired.verdicts(row(load(), "StdMap"))}
        churn = next(d for t, d in details.items() if t.startswith("churn"))
        self.assertIn("pmr pool 3000 ns, pmr pool/arena 0.97 (paired median) [missed]", churn)
        peer = next(d for t, d in details.items() if t.startswith("lookup: best"))
        self.assertEqual(peer, "arena_1g/mimalloc 0.990 (0.950-1.020)")

    def test_missing_contender_is_never_a_pass(self):
        r = row(load(), "StdUnorderedMap")
        got = {t.split(":")[0].split(" (")[0]: (s, d) for t, s, d in paired.verdicts(r)}
        status, detail = got["lookup"]
        # arena/jemalloc is 0.98, but mimalloc, which may be the best peer, was left out.
        self.assertEqual(status, "not measured")
        self.assertIn("mimalloc (libmimalloc.so.2: cannot open", detail)
        status, detail = got["lookup >= 1.3x glibc"]
        self.assertEqual(status, "missed")
        self.assertIn("1.26 (1.22-1.86)", detail)
        self.assertIn("within the noise", detail)
        self.assertEqual(got["arena RSS after build <= 1.10x live + 1 x 2 MiB"][0], "missed")
        status, detail = got["arena coverage >= 99% huge"]
        self.assertEqual(status, "missed")
        self.assertIn("arena 95.00%", detail)
        self.assertIn("arena_1g not measured (pool_exhausted", detail)

    def test_missing_peer_still_misses_when_ours_is_slower_than_the_other(self):
        r = row(load(), "StdUnorderedMap")
        r["counters"]["lookup_arena_over_jemalloc"] = 1.05
        status = next(s for t, s, _ in paired.verdicts(r) if t.startswith("lookup: best"))
        self.assertEqual(status, "missed")

    def test_missing_pmr_gives_not_measured(self):
        r = row(load(), "StdMap")
        for k in [k for k in r["counters"] if "pmr" in k]:
            del r["counters"][k]
        r["left_out"]["pmr"] = "bad_alloc"
        got = {t.split(":")[0]: (s, d) for t, s, d in paired.verdicts(r)}
        self.assertEqual(got["build"][0], "not measured")
        self.assertIn("pmr pool not measured (bad_alloc)", got["build"][1])

    def test_failed_row(self):
        self.assertEqual(paired.verdicts(row(load(), "NodeHashMap")),
                         [("all targets", "not measured",
                           "the row failed: the arena over THP could not be built")])

    def test_lookup_targets_not_judged_below_one_gib(self):
        r = row(load(), "StdMap")
        r["counters"]["live_mib"] = 64.0
        s = statuses(r)
        self.assertEqual((s["lookup >= 1.3x glibc"], s["lookup"]), ("not judged", "not judged"))
        self.assertEqual(s["build"], "met")  # the others apply at every size

    def test_rss_bound_counts_one_page_per_size_class(self):
        r = row(load(), "StdMap")
        r["counters"]["live_mib"] = 64.0
        r["counters"]["rss_over_live_arena"] = 1.13  # bound 1.10 + 2/64 = 1.13125
        rss = next(s for t, s, _ in paired.verdicts(r) if t.startswith("arena RSS"))
        self.assertEqual(rss, "met")
        r["counters"]["rss_over_live_arena"] = 1.14
        rss = next(s for t, s, _ in paired.verdicts(r) if t.startswith("arena RSS"))
        self.assertEqual(rss, "missed")
        del r["counters"]["rss_over_live_arena"]
        rss = next((s, d) for t, s, d in paired.verdicts(r) if t.startswith("arena RSS"))
        self.assertEqual(rss[0], "not measured")
        self.assertIn("memory reused", rss[1])


class Report(unittest.TestCase):
    def test_markdown_file(self):
        with tempfile.TemporaryDirectory() as d, redirect_stdout(io.StringIO()) as out:
            path = paired.write_report(load(), Path(d), {"rounds": 15, "wall_s": 700.0,
                                                         "cmd": ["./arena_bench", "--sizes=1G"]})
            md = path.read_text()
        self.assertEqual(path.name, "paired-nodes.md")
        self.assertIn("| contender | lookup ns | vs arena (min-max) | churn ns | build ns | "
                      "RSS/live | huge % | coverage % |", md)
        self.assertIn("| std | 2900 | 1.37 (1.31-1.47) | 4000 | 2750 | 1.330 | 0.0 | - |", md)
        self.assertIn("| arena_1g | 2070 | 0.97 (0.90-1.00) | 3050 | 1370 | - | - | 100.0 |", md)
        self.assertIn("| mimalloc | - | left out | - | - | - | - | - |", md)
        self.assertIn("`std::map<u64,u64>`: 22,369,621 elements, live 1024 MiB, 40 rounds.", md)
        self.assertIn("- best of ours / best peer lookup: arena_1g/mimalloc 0.990 (0.950-1.020)",
                      md)
        self.assertIn("- **met** lookup >= 1.3x glibc (glibc/arena, paired median): glibc/arena "
                      "1.37 (1.31-1.47)", md)
        self.assertIn("- left out: arena_1g: pool_exhausted: no free 1 GiB page; the pool has 0 "
                      "of 2", md)
        self.assertIn("Failed: the arena over THP could not be built", md)
        self.assertIn("`absl::node_hash_map<u64,u64>`: 33,554,432 elements.", md)
        self.assertIn("15 round(s)", md)
        self.assertIn("host testhost, 2 CPUs at 2600 MHz", md)
        text = out.getvalue()
        self.assertIn("[missed] churn: no slower than glibc and the pmr pool", text)
        self.assertIn("Targets: 7 met, 4 missed, 2 not measured", text)

    def test_cli_paired_report(self):
        with tempfile.TemporaryDirectory() as d, redirect_stdout(io.StringIO()) as out:
            rc = cli.main(["--paired-report", str(FIXTURE), "--out", d])
            self.assertEqual(rc, 0)
            self.assertTrue((Path(d) / "paired-nodes.md").exists())
        self.assertIn("StdMap (std::map<u64,u64>): 22,369,621 elements", out.getvalue())
        with self.assertRaises(SystemExit) as e, tempfile.TemporaryDirectory() as d:
            cli.main(["--paired-report", str(Path(d) / "none.json")])
        self.assertIn("does not exist", str(e.exception.code))


class Plan(unittest.TestCase):
    def args(self, argv=()):
        return cli.parse_args(list(argv))

    def test_rule(self):
        reg = fixtures.registry()
        node = fixtures.suite("StdMap_Lookup", 60, family=paired.NODE_FAMILY)
        from runner.registry import Registry
        reg = Registry.from_json({"schema": 1, "allocators": fixtures.ALL,
                                  "suites": [s.__dict__ for s in reg.suites] + [node]})
        plan = lambda *a: paired.plan(self.args(a), reg)
        self.assertEqual(plan(), (1 << 30, 15, ""))
        self.assertEqual(plan("--quick"), (64 * MiB, 3, ""))
        self.assertEqual(plan("--no-paired")[0], None)
        self.assertEqual(plan("--sizes", "4M,256M"), (256 * MiB, 15, ""))
        size, _, why = plan("--sizes", "4M")
        self.assertIsNone(size)
        self.assertIn("below the node comparison's smallest size (64 MiB)", why)
        self.assertEqual(plan("--suites", "Map_Lookup"),
                         (None, None, "--suites names no node-container suite"))
        self.assertEqual(plan("--suites", "Map_Lookup,StdMap_Lookup")[0], 1 << 30)
        self.assertEqual(plan("--quick", "--sizes", "1G", "--paired-rounds", "5"),
                         (1 << 30, 5, ""))
        self.assertEqual(plan("--suites", "Map_Lookup", "--paired-size", "2G")[0], 2 << 30)

    def test_bad_flags(self):
        for argv in (["--paired-size", "0"], ["--paired-size", "1X"],
                     ["--paired-rounds", "0"]):
            with self.assertRaises(SystemExit), redirect_stdout(io.StringIO()), \
                    unittest.mock.patch("sys.stderr", io.StringIO()):
                self.args(argv)

    def test_command(self):
        self.assertEqual(paired.size_flag(1 << 30), "1G")
        self.assertEqual(paired.size_flag(1536 * MiB), "1536M")
        self.assertEqual(paired.command("./arena_bench", 64 * MiB, 3),
                         ["./arena_bench", "--sizes=64M", "--rounds=3",
                          "--benchmark_filter=^BM_Paired_",
                          "--benchmark_out=raw/paired-nodes.json", "--benchmark_out_format=json"])
        self.assertEqual(paired.command("./arena_bench", 1 << 30, 15, 60)[:4],
                         ["./arena_bench", "--sizes=1G", "--rounds=15", "--round-seconds=60"])

    def test_default_binary_beside_bench(self):
        a = self.args(["--bench", "/x/y/hugepage_bench"])
        self.assertEqual(a.paired_bench, Path("/x/y/arena_bench"))


class Run(unittest.TestCase):
    def test_runs_from_the_output_directory_and_records_the_run(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            fake = d / "fake_arena_bench"
            # Writes the fixture where --benchmark_out says, relative to its working directory.
            fixture = shlex.quote(str(FIXTURE))
            fake.write_text("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --benchmark_out=*) "
                            f"cp {fixture} \"${{a#--benchmark_out=}}\";; esac; done\n"
                            "echo \"MALLOC_CONF=${MALLOC_CONF:-unset}\"\n")
            fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
            out = d / "out"
            args = self.args(fake)
            with unittest.mock.patch.dict(os.environ, {"MALLOC_CONF": "junk"}):
                record = paired.run(args, out, 64 * MiB, 3)
            self.assertEqual((record["rc"], record["json"], record["size"], record["rounds"]),
                             (0, "raw/paired-nodes.json", 64 * MiB, 3))
            self.assertNotIn("problem", record)
            self.assertEqual(record["cmd"][0], "../fake_arena_bench")
            self.assertEqual(paired.read(out / paired.JSON_NAME)[0], load())
            log = (out / paired.LOG_NAME).read_text()
            self.assertIn("# cmd: ../fake_arena_bench --sizes=64M --rounds=3", log)
            self.assertIn("MALLOC_CONF=unset", log)  # the caller's malloc settings removed

    def test_no_json_in_words(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            fake = d / "fails"
            fake.write_text("#!/bin/sh\necho broken\nexit 3\n")
            fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
            with redirect_stdout(io.StringIO()), unittest.mock.patch("sys.stderr", io.StringIO()):
                record = paired.run(self.args(fake), d / "out", 64 * MiB, 3)
            self.assertEqual(record["rc"], 3)
            self.assertIn("paired-nodes.json does not exist", record["problem"])

    def test_step_after_the_rounds(self):
        """cli.paired_step: runs, reports into paired-nodes.md, records itself in results.json;
        --no-paired and a missing binary are recorded as skipped, a failure is exit status 1."""
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            fake = d / "fake_arena_bench"
            fixture = shlex.quote(str(FIXTURE))
            fake.write_text("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --benchmark_out=*) "
                            f"cp {fixture} \"${{a#--benchmark_out=}}\";; esac; done\n")
            fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
            out = d / "out"
            out.mkdir()
            (out / "results.json").write_text('{"rounds": 2}')
            reg = fixtures.registry()
            quiet = lambda: (redirect_stdout(io.StringIO()),
                             unittest.mock.patch("sys.stderr", io.StringIO()))
            a, b = quiet()
            with a, b:
                rc = cli.paired_step(cli.parse_args(["--quick", "--paired-bench", str(fake)]),
                                     reg, out)
            self.assertEqual(rc, 0)
            saved = json.loads((out / "results.json").read_text())
            self.assertEqual(saved["rounds"], 2)
            self.assertEqual((saved["paired"]["rc"], saved["paired"]["size"],
                              saved["paired"]["rounds"]), (0, 64 * MiB, 3))
            self.assertTrue(saved["paired"]["machine"])
            self.assertIn("## StdMap", (out / "paired-nodes.md").read_text())
            a, b = quiet()
            with a, b:
                rc = cli.paired_step(cli.parse_args(["--no-paired"]), reg, out)
            self.assertEqual(rc, 0)
            self.assertEqual(json.loads((out / "results.json").read_text())["paired"],
                             {"skipped": "--no-paired"})
            a, b = quiet()
            with a, b:
                rc = cli.paired_step(cli.parse_args(["--paired-bench", str(d / "none")]), reg, out)
            self.assertEqual(rc, 0)
            self.assertIn("not found or not executable",
                          json.loads((out / "results.json").read_text())["paired"]["skipped"])
            fake.write_text("#!/bin/sh\nexit 3\n")
            a, b = quiet()
            with a, b:
                rc = cli.paired_step(cli.parse_args(["--paired-bench", str(fake)]), reg, out)
            self.assertEqual(rc, 1)
            # The earlier run's JSON is gone, not reported as this run's.
            self.assertIn("does not exist",
                          json.loads((out / "results.json").read_text())["paired"]["problem"])

    @staticmethod
    def args(binary):
        a = cli.parse_args(["--paired-bench", str(binary)])
        return a


if __name__ == "__main__":
    unittest.main()
