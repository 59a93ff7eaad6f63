"""The suites, as the benchmark binary declares them (`hugepage_bench --list --json`).

The binary's registry (bench/registry.hpp) is the only list of suites: which allocators and sizes
each has, which rounds run it, whether the peers run it, which table and chart show it. The
runner asks the binary, and keeps a copy in results.json so that --from needs no binary.
"""

import json
import subprocess
from dataclasses import asdict, dataclass, field

SCHEMA = 2


@dataclass(frozen=True)
class Suite:
    name: str
    order: int
    family: str
    description: str
    per_op: str                 # unit of the time column, e.g. "ns/lookup"
    time_unit: str              # google-benchmark's unit: "ns" or "ms"
    real_time: bool
    allocators: tuple
    sizes: tuple
    quick_sizes: tuple
    quick: bool                 # in the binary's --quick default
    core: bool                  # runs in every round (else the heavy rounds only)
    first_round_only: bool      # a full run measures it in round 1 only
    peers: str                  # "none", "full" (full runs), "core" (every round, --quick too)
    table: str                  # "time", "bloat", "tail", "scenario"
    tail_of: str = None         # table == "tail": the suite whose table shows the percentiles
    chart: bool = False
    own_process: bool = False   # run in a process of its own (it measures what the process holds)
    decays_on_purpose: bool = False  # its rows lose huge pages on purpose (low coverage is no fault)
    paired: tuple = ()          # --paired contenders: ({"name", "role"}, ...); () = no paired mode
    targets: tuple = ()         # claims the report judges (registry.hpp target_info; targets.py)

    @property
    def scale(self):
        """ns per unit of the time column."""
        return {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[self.time_unit]


@dataclass
class Registry:
    allocators: list
    suites: list = field(default_factory=list)
    latency_batch: int = 0

    def names(self, pred=lambda s: True):
        return [s.name for s in self.suites if pred(s)]

    def get(self, name):
        return next((s for s in self.suites if s.name == name), None)

    def core(self):
        return self.names(lambda s: s.core)

    def quick(self):
        return self.names(lambda s: s.quick)

    def peer_default(self):
        """Suites the peers run in a full run (never the scenarios: --scenarios runs those)."""
        return self.names(lambda s: s.peers in ("full", "core") and s.table != "scenario")

    def scenarios(self):
        """The scenario suites (table "scenario"): run only by --scenarios or when named."""
        return self.names(lambda s: s.table == "scenario")

    def peer_core(self):
        """Suites the peers run in every round, and in --quick."""
        return self.names(lambda s: s.peers == "core")

    def chart_suites(self):
        return self.names(lambda s: s.chart)

    def own_process(self):
        return self.names(lambda s: s.own_process)

    def first_round_only(self):
        return self.names(lambda s: s.first_round_only)

    def tails_of(self, name):
        return [s for s in self.suites if s.table == "tail" and s.tail_of == name]

    def pairable(self):
        """Suites with a paired mode (hugepage_bench --paired)."""
        return self.names(lambda s: s.paired)

    def suites_of_allocator(self, allocator):
        return self.names(lambda s: allocator in s.allocators)

    def to_json(self):
        return {"schema": SCHEMA, "allocators": self.allocators, "latency_batch": self.latency_batch,
                "suites": [asdict(s) for s in self.suites]}

    @classmethod
    def from_json(cls, data):
        if data.get("schema") != SCHEMA:
            raise ValueError(f"suite registry schema {data.get('schema')!r}, expected {SCHEMA}")
        suites = []
        for d in data["suites"]:
            d = dict(d)
            for k in ("allocators", "sizes", "quick_sizes", "paired", "targets"):
                d[k] = tuple(d.get(k, ()))
            suites.append(Suite(**d))
        suites.sort(key=lambda s: s.order)
        return cls(list(data["allocators"]), suites, data.get("latency_batch", 0))


def load(bench):
    """The registry of the binary `bench` (raises RuntimeError with the reason when it fails)."""
    try:
        r = subprocess.run([str(bench), "--list", "--json"], capture_output=True, text=True,
                           timeout=60)
    except OSError as e:
        raise RuntimeError(f"cannot run {bench}: {e}") from e
    if r.returncode != 0:
        raise RuntimeError(f"{bench} --list --json failed (exit status {r.returncode}): "
                           f"{r.stderr.strip()[-300:]}")
    try:
        return Registry.from_json(json.loads(r.stdout))
    except (ValueError, KeyError, TypeError) as e:
        raise RuntimeError(f"{bench} --list --json: unreadable suite list ({e})") from e
