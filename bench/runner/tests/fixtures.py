"""Made-up registries, configurations and cells for the runner's tests."""

from types import SimpleNamespace

from runner.configs import Config
from runner.registry import Registry
from runner.stats import Cell

ALL = ["std", "thp", "hugetlb_2m", "hugetlb_1g", "collapse", "thp_prefault"]
OURS = ALL[:-1]
SIZES = [4 << 20, 64 << 20]


def suite(name, order, **kw):
    d = {"name": name, "order": order, "family": "test", "description": name, "per_op": "ns/op",
         "time_unit": "ns", "real_time": False, "allocators": OURS, "sizes": SIZES,
         "quick_sizes": SIZES[:1], "quick": False, "core": False, "first_round_only": False,
         "peers": "none", "table": "time", "tail_of": None, "chart": False}
    d.update(kw)
    return d


def registry():
    return Registry.from_json({"schema": 2, "allocators": ALL, "latency_batch": 64, "suites": [
        suite("Map_Build", 30, per_op="ms/build", time_unit="ms", real_time=True,
              first_round_only=True),
        suite("Map_Lookup", 10, per_op="ns/lookup", quick=True, core=True, peers="core",
              chart=True),
        suite("Map_LookupLatency", 12, quick=True, core=True, peers="core", table="tail",
              tail_of="Map_Lookup"),
        suite("FaultIn", 40, allocators=ALL, peers="full", time_unit="ms", real_time=True),
        suite("Bloat_Sparse", 50, table="bloat"),
    ]})


def configs(reg):
    return [Config("glibc", {}, ["std"], None, peer=False, expect_huge=False, core=reg.core()),
            Config("ours thp", {}, ["thp", "thp_prefault"], None, peer=False, core=reg.core()),
            Config("jemalloc", {"LD_PRELOAD": "/x/libjemalloc.so.2"}, ["std"],
                   reg.peer_default(), peer=True, core=reg.peer_core())]


def args(**kw):
    a = SimpleNamespace(quick=False, rounds=3, peer_round_set={1, 2, 3}, heavy_round_set={1},
                        suites=None, allocators=None, sizes=None, sizes_text=None, cpu=None,
                        extra=[], min_time="0.1", bench="hugepage_bench")
    a.__dict__.update(kw)
    return a


def cell(suite, label, ws, config, allocator, ns_by_round, **counters):
    """A cell as execute.collect makes it, before stats.summarize."""
    return Cell(suite, label, ws, config, allocator,
                [{"round": r, "ns": ns, "counters": dict(counters)} for r, ns in ns_by_round.items()])
