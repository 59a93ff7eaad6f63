"""The runner's numeric flags and the directories it reads and writes: a bad value or file ends
with a clear error naming it, never a traceback, never a run that goes on without its rows."""

import io
import json
import shutil
import tempfile
import unittest
import unittest.mock
from contextlib import redirect_stdout
from pathlib import Path

from runner import cli
from runner.tests import fixtures


def refused(testcase, argv, message, code=2):
    """cli.main(argv) ends with exit status `code` and `message`: a usage error is 2, said on
    stderr; a file error is 1, the exit's text."""
    err = io.StringIO()
    with testcase.assertRaises(SystemExit) as e, redirect_stdout(io.StringIO()), \
            unittest.mock.patch("sys.stderr", err):
        cli.main(argv)
    got, text = e.exception.code, err.getvalue()
    if isinstance(got, str):
        got, text = 1, got
    testcase.assertEqual(got, code, text)
    testcase.assertIn(message, text)


class NumericFlags(unittest.TestCase):
    def test_out_of_range_is_an_error(self):
        for argv, message in (
                (["--rounds", "0"], "--rounds: 0 is not 1 to 1000"),
                (["--rounds", "-3"], "--rounds: -3 is not 1 to 1000"),
                (["--rounds", "1001"], "--rounds: 1001 is not 1 to 1000"),
                (["--heavy-rounds", "-1"], "--heavy-rounds: -1 is not 0 to 1000"),
                (["--peer-rounds", "-1"], "--peer-rounds: -1 is not 0 to 1000"),
                (["--rounds", "3", "--heavy-rounds", "4"],
                 "--heavy-rounds: 4 is more than the run's 3 round(s)"),
                (["--peer-rounds", "6"], "--peer-rounds: 6 is more than the run's 5 round(s)"),
                (["--timeout", "0"], "--timeout: 0 is not 1 to"),
                (["--paired-timeout", "-5"], "--paired-timeout: -5 is not 1 to"),
                (["--min-time", "nan"], "--min-time: 'nan' is not a number of seconds above 0"),
                (["--min-time", "inf"], "--min-time: 'inf' is not a number"),
                (["--min-time", "-1"], "--min-time: '-1' is not a number"),
                (["--min-time", "0"], "--min-time: '0' is not a number"),
                (["--min-time", "1e9"], "--min-time: '1e9' is not a number"),
                (["--min-time", "fast"], "--min-time: 'fast' is not a number")):
            with self.subTest(argv=argv):
                refused(self, argv, message)

    def test_in_range_is_kept(self):
        args = cli.parse_args(["--rounds", "1", "--min-time", "0.5", "--heavy-rounds", "0",
                               "--peer-rounds", "1", "--timeout", "60"])
        self.assertEqual((args.rounds, args.min_time, args.heavy_round_set, args.peer_round_set,
                          args.timeout), (1, "0.5", set(), {1}, 60))


def registry_json():
    reg = fixtures.registry()
    return {"schema": 2, "allocators": reg.allocators, "latency_batch": 64,
            "suites": [{k: list(v) if isinstance(v, tuple) else v
                        for k, v in s.__dict__.items()} for s in reg.suites]}


def output_dir(root, raw_text='{"benchmarks": []}\n', problem=None):
    """An output directory as bench/run.py leaves it: results.json, and raw/r1-glibc.json."""
    d = Path(root) / "run"
    (d / "raw").mkdir(parents=True)
    run = {"round": 1, "config": "glibc", "cmd": [], "env": {}, "rc": 0, "wall_s": 1.0,
           "json": "raw/r1-glibc.json"}
    if problem:
        run["problem"] = problem
    results = {"registry": registry_json(), "date": "20261129-060000", "rounds": 1, "wall_s": 1.0,
               "configs": [{"name": "glibc", "env": {}, "allocators": ["std"], "suites": None,
                            "peer": False, "note": ""}],
               "runs": [run]}
    (d / "results.json").write_text(json.dumps(results))
    if raw_text is not None:
        (d / "raw" / "r1-glibc.json").write_text(raw_text)
    return d


class FromDirectory(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_an_intact_directory_loads(self):
        d = output_dir(self.tmp.name)
        _, _, _, configs, _, runs, _ = cli.load_previous(cli.parse_args(["--from", str(d)]))
        self.assertEqual([c.name for c in configs], ["glibc"])
        self.assertEqual(runs[0].data, {"benchmarks": []})

    def test_a_raw_json_cut_short_is_an_error_naming_it(self):
        d = output_dir(self.tmp.name, raw_text='{"benchmarks": [{"name": "BM_Map_Lookup/std/41')
        refused(self, ["--from", str(d)], f"{d / 'raw' / 'r1-glibc.json'} (round 1, glibc) wrote "
                                         f"unreadable JSON", code=1)

    def test_a_missing_raw_json_is_an_error_unless_the_run_said_so(self):
        d = output_dir(self.tmp.name, raw_text=None)
        refused(self, ["--from", str(d)], "r1-glibc.json (round 1, glibc) wrote no JSON", code=1)
        shutil.rmtree(d)
        d = output_dir(self.tmp.name, raw_text=None, problem="wrote no JSON")
        _, _, _, _, _, runs, _ = cli.load_previous(cli.parse_args(["--from", str(d)]))
        self.assertIsNone(runs[0].data)

    def test_a_bad_results_json_is_an_error_naming_it(self):
        d = output_dir(self.tmp.name)
        results = d / "results.json"
        text = results.read_text()
        results.write_text(text[:len(text) // 2])
        refused(self, ["--from", str(d)], f"{results} is not valid JSON", code=1)
        results.write_text(json.dumps({"date": "x"}))
        refused(self, ["--from", str(d)], "has no configs, runs, rounds, wall_s", code=1)
        results.write_text(json.dumps(json.loads(text) | {"runs": [{"round": 1}]}))
        refused(self, ["--from", str(d)], "is not as bench/run.py writes it (KeyError", code=1)
        results.unlink()
        refused(self, ["--from", str(d)], "no results.json there", code=1)
        refused(self, ["--from", str(d / "nothing")], "not a directory", code=1)

    def test_a_bad_out_is_an_error(self):
        d = output_dir(self.tmp.name)
        a_file = Path(self.tmp.name) / "file"
        a_file.write_text("")
        refused(self, ["--from", str(d), "--out", str(a_file)], "exists and is not a directory",
                code=1)
        refused(self, ["--from", str(d), "--out", str(a_file / "below")],
                "cannot make the directory", code=1)


if __name__ == "__main__":
    unittest.main()


class MemoryPlan(unittest.TestCase):
    """bench/run.py --plan on a stand-in binary whose plan leaves 64 MiB out: named by --sizes it
    is refused (exit status 2, nothing run), a default size is left out and said why, and the
    largest that fits is what scripts/bench sizes the pools by."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.bench = Path(self.tmp.name) / "bench"
        self.bench.write_text("""#!/usr/bin/env python3
import json, sys
sizes = next(a for a in sys.argv if a.startswith("--sizes="))[8:].split(",")
units = {"K": 10, "M": 20, "G": 30, "T": 40}
rows = []
for s in sizes:
    b = int(s[:-1]) << units[s[-1]] if s[-1] in units else int(s)
    rows.append({"size": b, "need": b + (512 << 20),
                 "left_out": "needs ~576 MiB, MemAvailable 100 MiB" if b >= 64 << 20 else None})
print(json.dumps({"mem_available": 100 << 20, "memory_cgroup": None, "sizes": rows,
                  "allocators_left_out": []}))
""")
        self.bench.chmod(0o755)

    def plan(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with unittest.mock.patch.object(cli, "load_registry", lambda bench: fixtures.registry()), \
                redirect_stdout(out), unittest.mock.patch("sys.stderr", err):
            try:
                rc = cli.main(["--plan", "--bench", str(self.bench), "--no-paired", *argv])
            except SystemExit as e:
                rc = e.code
        return rc, out.getvalue(), err.getvalue()

    def test_a_named_size_that_does_not_fit_is_refused(self):
        rc, out, err = self.plan("--sizes", "4M,64M")
        self.assertEqual(rc, 2)
        self.assertEqual(out, "")
        self.assertIn("  --sizes 64 MiB: needs ~576 MiB, MemAvailable 100 MiB", err)
        self.assertIn("nothing was reserved or run", err)

    def test_a_default_size_that_does_not_fit_is_left_out(self):
        rc, out, err = self.plan()  # the fixture registry's sizes: 4 MiB and 64 MiB
        self.assertEqual(rc, 0)
        self.assertEqual(out.split(), [str(4 << 20), str((4 << 20) + (512 << 20)), "0", "0",
                                       str(100 << 20)])
        self.assertIn("plan: 64 MiB left out: needs ~576 MiB, MemAvailable 100 MiB", err)
