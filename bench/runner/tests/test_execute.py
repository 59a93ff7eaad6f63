import io
import json
import tempfile
import unittest
import unittest.mock
from pathlib import Path

from runner import execute

from . import fixtures


class ReadJson(unittest.TestCase):
    def test_problems_in_words(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "r.json"
            self.assertEqual(execute.read_json(p), (None, "wrote no JSON"))
            p.write_text("")
            self.assertEqual(execute.read_json(p)[1],
                             "wrote an empty JSON file (it ran no benchmark row)")
            p.write_text("{")
            self.assertTrue(execute.read_json(p)[1].startswith("wrote unreadable JSON"))
            p.write_text('{"benchmarks": []}')
            self.assertEqual(execute.read_json(p), ({"benchmarks": []}, ""))


class ExitStatus(unittest.TestCase):
    def test_oom_kill_count(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(execute.oom_kills(d))
            (Path(d) / "proc").mkdir()
            (Path(d) / "proc" / "vmstat").write_text("nr_free_pages 5\noom_kill 7\n")
            self.assertEqual(execute.oom_kills(d), 7)
            (Path(d) / "proc" / "vmstat").write_text("oom_kill_x 3\n")
            self.assertIsNone(execute.oom_kills(d))

    def test_an_oom_kill_is_said_as_such(self):
        self.assertEqual(execute.describe_exit(1), "exit status 1")
        self.assertEqual(execute.describe_exit(-15), "killed by SIGTERM (exit status -15)")
        self.assertEqual(execute.describe_exit(-9, 4, 4), "killed by SIGKILL (exit status -9)")
        self.assertEqual(execute.describe_exit(-9), "killed by SIGKILL (exit status -9)")
        self.assertIn("killed by the kernel's OOM killer", execute.describe_exit(-9, 4, 5))

    def test_run_once_says_oom_kill(self):
        """A benchmark SIGKILLed while the OOM killer's count rises: the log and the run's problem
        say OOM, not only "exit status -9"."""
        with tempfile.TemporaryDirectory() as d:
            fake = Path(d) / "bench"
            fake.write_text("#!/bin/sh\nkill -9 $$\n")
            fake.chmod(0o755)
            out = Path(d) / "out"
            args = fixtures.args(bench=str(fake), timeout=60, paired_timeout=60)
            config = fixtures.configs(fixtures.registry())[0]
            counts = iter([10, 11])
            err = io.StringIO()
            with unittest.mock.patch.object(execute, "oom_kills", lambda: next(counts)), \
                    unittest.mock.patch("sys.stderr", err):
                run = execute.run_once(args, config, 1, out, ["Map_Lookup"])
            self.assertEqual(run.rc, -9)
            self.assertIn("killed by the kernel's OOM killer", run.problem)
            self.assertIn("r1-glibc: killed by the kernel's OOM killer", err.getvalue())


class DiedProcess(unittest.TestCase):
    def test_rows_of_a_process_killed_before_its_json_are_failed(self):
        reg = fixtures.registry()
        cfgs = fixtures.configs(reg)
        cmd = ["./hugepage_bench", "--sizes=4M", "--suites=FaultIn", "--allocators=std",
               "--benchmark_out=raw/r2-jemalloc-FaultIn-4194304.json"]
        died = execute.Run(2, "jemalloc", cmd, {}, -7, 3.0, "raw/x.json", None, "wrote no JSON")
        ok = execute.Run(1, "jemalloc", cmd, {}, 0, 3.0, "raw/y.json", {"benchmarks": [
            {"name": "BM_FaultIn/std/4194304", "run_type": "iteration", "real_time": 5.0,
             "cpu_time": 5.0, "time_unit": "ms"}]})
        cells = execute.collect([ok, died], cfgs, "auto")
        c = cells[("FaultIn", "jemalloc", 4 << 20)]
        self.assertEqual(len(c.samples), 1)
        self.assertEqual(c.errors, ["FAILED: its process was killed by SIGBUS before it wrote its "
                                    "results (round 2; wrote no JSON)"])

    def test_a_run_not_started_or_without_its_rows_named_makes_no_cell(self):
        reg = fixtures.registry()
        cfgs = fixtures.configs(reg)
        cmd = ["./hugepage_bench", "--sizes=4M", "--suites=FaultIn", "--allocators=std"]
        for rc, c in ((126, cmd), (1, cmd[:2])):
            run = execute.Run(1, "jemalloc", c, {}, rc, 0.1, "raw/x.json", None, "wrote no JSON")
            self.assertEqual(execute.collect([run], cfgs, "auto"), {})
        self.assertEqual(execute.ended_text(124), "was killed at its time limit")
        self.assertEqual(execute.ended_text(3), "exited with status 3")


class Collect(unittest.TestCase):
    def test_cells_from_runs(self):
        reg = fixtures.registry()
        cfgs = fixtures.configs(reg)
        def run(rnd, config, ns, extra=None):
            alloc = "thp" if config == "ours thp" else "std"
            b = {"name": f"BM_Map_Lookup/{alloc}/4194304",
                 "run_type": "iteration", "cpu_time": ns, "real_time": ns * 2,
                 "time_unit": "ns", "coverage_pct": 100.0, **(extra or {})}
            err = {"name": f"BM_Map_Lookup/{alloc}/67108864", "run_type": "iteration",
                   "error_occurred": True, "error_message": "pool too small"}
            return execute.Run(rnd, config, [], {}, 0, 1.0, "raw/x.json",
                               {"benchmarks": [b, err]})
        runs = [run(1, "glibc", 10.0), run(1, "ours thp", 5.0), run(2, "glibc", 12.0),
                run(2, "ours thp", 4.0)]
        cells = execute.collect(runs, cfgs, "auto")
        thp = cells[("Map_Lookup", "ours thp", 4 << 20)]
        self.assertEqual([s["ns"] for s in thp.samples], [5.0, 4.0])  # CPU time for lookups
        self.assertEqual(thp.speedup["median"], 2.5)
        self.assertEqual(cells[("Map_Lookup", "glibc std", 64 << 20)].errors,
                         ["pool too small", "pool too small"])
        self.assertEqual(json.loads(json.dumps(runs[0].to_json()))["json"], "raw/x.json")


if __name__ == "__main__":
    unittest.main()
