import json
import tempfile
import unittest
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
