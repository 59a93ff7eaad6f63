import unittest

from runner import configs, plan

from . import fixtures


class Rounds(unittest.TestCase):
    def test_spread_rounds_keeps_first_and_last(self):
        self.assertEqual(plan.spread_rounds(3, 5), {1, 3, 5})
        self.assertEqual(plan.spread_rounds(1, 5), {1})
        self.assertEqual(plan.spread_rounds(0, 5), set())
        self.assertEqual(plan.spread_rounds(9, 2), {1, 2})

    def test_rotation(self):
        self.assertEqual(plan.rotation([1, 2, 3], 2), [2, 3, 1])
        self.assertEqual(plan.rotation([1, 2, 3], 4), [1, 2, 3])


class SplitProcesses(unittest.TestCase):
    def setUp(self):
        from runner.registry import Registry
        self.reg = Registry.from_json({"schema": 2, "allocators": fixtures.ALL, "suites": [
            fixtures.suite("Map_Lookup", 10),
            fixtures.suite("Map_Purge", 20, table="bloat", own_process=True, sizes=[1, 2],
                           quick_sizes=[1]),
            fixtures.suite("FaultIn", 40),
            fixtures.suite("Map_PurgeScattered", 21, table="bloat", own_process=True,
                           sizes=[4])]})

    def test_own_process_suites_run_alone_one_size_per_process(self):
        self.assertEqual(
            plan.split_processes(["Map_Lookup", "Map_Purge", "FaultIn", "Map_PurgeScattered"],
                                 self.reg, fixtures.args()),
            [(["Map_Lookup", "FaultIn"], "", None), (["Map_Purge"], "Map_Purge-1", 1),
             (["Map_Purge"], "Map_Purge-2", 2), (["Map_PurgeScattered"], "Map_PurgeScattered-4", 4)])
        # --quick takes the quick sizes, --sizes the run's; no empty main run.
        self.assertEqual(plan.split_processes(["Map_Purge"], self.reg, fixtures.args(quick=True)),
                         [(["Map_Purge"], "Map_Purge-1", 1)])
        self.assertEqual(plan.split_processes(["Map_Purge"], self.reg, fixtures.args(sizes=[8])),
                         [(["Map_Purge"], "Map_Purge-8", 8)])
        self.assertEqual(plan.split_processes([], self.reg, fixtures.args()), [])

    def test_one_size_on_the_command_line(self):
        cmd = plan.bench_command(fixtures.args(sizes=[1, 2], sizes_text=["1", "2"]),
                                 fixtures.configs(self.reg)[0], "raw/x.json", ["Map_Purge"],
                                 size=2)
        self.assertIn("--sizes=2", cmd)
        self.assertNotIn("--sizes=1,2", cmd)

    def test_registries_without_the_field_read_as_shared(self):
        self.assertEqual(plan.split_processes(["Map_Lookup", "FaultIn"], fixtures.registry(),
                                              fixtures.args()),
                         [(["Map_Lookup", "FaultIn"], "", None)])


class SuitesForRound(unittest.TestCase):
    def setUp(self):
        self.reg = fixtures.registry()
        self.glibc, self.thp, self.jemalloc = fixtures.configs(self.reg)

    def test_registry_order_and_heavy_rounds(self):
        a = fixtures.args(heavy_round_set={1})
        self.assertEqual(plan.suites_for_round(a, self.glibc, 1, self.reg),
                         ["Map_Lookup", "Map_LookupLatency", "Map_Build", "FaultIn", "Bloat_Sparse"])
        # Later rounds: the core suites only, and never the first-round-only ones.
        self.assertEqual(plan.suites_for_round(a, self.glibc, 2, self.reg),
                         ["Map_Lookup", "Map_LookupLatency"])
        a.heavy_round_set = {1, 2}
        self.assertNotIn("Map_Build", plan.suites_for_round(a, self.glibc, 2, self.reg))

    def test_quick_runs_the_quick_suites(self):
        a = fixtures.args(quick=True, heavy_round_set={1, 2})
        self.assertEqual(plan.suites_for_round(a, self.glibc, 2, self.reg),
                         ["Map_Lookup", "Map_LookupLatency"])

    def test_allocator_applicability(self):
        only_prefault = configs.Config("p", {}, ["thp_prefault"], None, peer=False,
                                       core=self.reg.core())
        self.assertEqual(plan.suites_for_round(fixtures.args(), only_prefault, 1, self.reg),
                         ["FaultIn"])

    def test_peers(self):
        a = fixtures.args(peer_round_set={1, 3})
        self.assertEqual(plan.suites_for_round(a, self.jemalloc, 1, self.reg),
                         ["Map_Lookup", "Map_LookupLatency", "FaultIn"])
        self.assertEqual(plan.suites_for_round(a, self.jemalloc, 2, self.reg), [])
        self.assertEqual(plan.suites_for_round(a, self.jemalloc, 3, self.reg),
                         ["Map_Lookup", "Map_LookupLatency"])

    def test_command_line(self):
        cmd = plan.bench_command(fixtures.args(cpu=1), self.thp, "raw/r1.json",
                                 ["Map_Lookup"], bench="../../build/bench/hugepage_bench")
        self.assertEqual(cmd[:4], ["../../build/bench/hugepage_bench", "--suites=Map_Lookup",
                                   "--allocators=thp,thp_prefault", "--cpu=1"])
        self.assertIn("--benchmark_out=raw/r1.json", cmd)


class OneGibPool(unittest.TestCase):
    """The gate of the 1 GiB configurations, over the machine facts the binary reads."""

    def setUp(self):
        self.facts = {"cpu": {"model": "x", "pdpe1gb": None}, "pool_sizes": [], "pools": []}

    def shortage(self, max_size=256 << 20):
        return configs.one_gib_pool_shortage(max_size, self.facts)

    def test_no_pdpe1gb(self):
        self.facts["cpu"]["pdpe1gb"] = False
        self.assertEqual(self.shortage(),
                         "this CPU has no 1 GiB pages (no pdpe1gb flag in /proc/cpuinfo)")

    def test_pool_hidden_or_unreadable(self):
        self.facts["cpu"]["pdpe1gb"] = True
        self.assertIn("has no 1 GiB hugetlb pool", self.shortage())
        self.facts["pool_sizes"] = [1 << 30]  # an empty bind mount over the sysfs directory
        self.assertIn("the 1 GiB pool could not be reserved", self.shortage())
        self.assertIn("free_hugepages is not readable", self.shortage())

    def test_too_few_free_pages(self):
        self.facts["cpu"]["pdpe1gb"] = True
        self.facts["pool_sizes"] = [2 << 20, 1 << 30]
        self.facts["pools"] = [{"page_bytes": 2 << 20, "total": 9, "free": 9, "available": 9},
                               {"page_bytes": 1 << 30, "total": 2, "free": 1, "available": 1}]
        self.assertEqual(self.shortage(256 << 20), "")
        why = self.shortage(1 << 30)  # a 1 GiB working set's map needs two pages
        self.assertIn("1 free page(s) of 2, the largest working set needs 2", why)

    def test_reserved_pages_are_not_available(self):
        self.facts["cpu"]["pdpe1gb"] = True
        self.facts["pool_sizes"] = [1 << 30]
        self.facts["pools"] = [{"page_bytes": 1 << 30, "total": 2, "free": 2, "reserved": 1,
                                "available": 1}]
        self.assertEqual(self.shortage(256 << 20), "")
        self.assertEqual(self.shortage(1 << 30),
                         "the 1 GiB pool could not be reserved: 1 free page(s) (1 more reserved "
                         "by mappings) of 2, the largest working set needs 2 (scripts/bench "
                         "reserves them when root and memory is not too fragmented)")
        self.facts["pools"][0].pop("available")  # a binary that does not say: not guessed
        self.assertIn("free_hugepages is not readable", self.shortage())

    def test_facts_the_binary_could_not_give(self):
        self.facts = {"problem": "hugepage_bench --machine-facts --json: exit status 2"}
        self.assertEqual(self.shortage(), "the machine facts could not be read "
                                          "(hugepage_bench --machine-facts --json: exit status 2)")


if __name__ == "__main__":
    unittest.main()
