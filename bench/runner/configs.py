"""The configurations: one way each of running hugepage_bench, and the probes that prove a peer
was loaded with the options it was given.

  glibc            std rows under plain glibc: the baseline every speedup is measured against
  ours <allocator> one configuration per hugepage allocator (thp, hugetlb_2m, hugetlb_1g,
                   collapse, thp_prefault) under plain glibc, each its own process
  glibc hugetlb=1  std rows, GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (madvise THP on malloc's mmaps)
  glibc hugetlb=2  std rows, GLIBC_TUNABLES=glibc.malloc.hugetlb=2 (MAP_HUGETLB from the 2 MiB pool)
  jemalloc         std rows, Debian's libjemalloc2 (5.3) via LD_PRELOAD, MALLOC_CONF=thp:always,...
  mimalloc         std rows, Debian's libmimalloc2.0 (2.0.x) via LD_PRELOAD, large/huge OS pages
  thp always       (--scenarios, --thp-always) std rows under plain glibc with THP `always` machine-wide, written
                   for that process only and put back after it (root only)
  thp always fast khugepaged
                   (--scenarios, Scenario_SparseIdle) the same with khugepaged scanning faster
"""

import math
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import sysfs
from .util import GiB

# Environment variables that select or tune a malloc: removed before each run, then set per config.
MALLOC_ENV_PREFIXES = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "JE_MALLOC_CONF",
                       "_RJEM_MALLOC_CONF", "MIMALLOC_")
POOL_1G_DIR = "/sys/kernel/mm/hugepages/hugepages-1048576kB"


@dataclass
class Config:
    name: str                 # short id, used in file names
    env: dict                 # environment added on top of a malloc-clean environment
    allocators: list
    suites: list              # None: every suite of the registry that applies
    peer: bool
    note: str = ""
    expect_huge: bool = True
    lib: str = None           # the preloaded .so, if any
    core: list = field(default_factory=list)  # suites it runs in every round
    verified: bool = None     # result of the load probe
    context_shows_preload: bool = None
    sysfs: dict = field(default_factory=dict)  # machine-wide settings for its process (sysfs.py)

    def row_label(self, allocator):
        if not self.peer:
            return "glibc std" if allocator == "std" else f"ours {allocator}"
        return self.name if allocator == "std" else f"{self.name} {allocator}"

    def env_text(self):
        text = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items()) or "(plain glibc)"
        if self.sysfs:
            text += "; " + ", ".join(f"{os.path.relpath(k, sysfs.THP)}={v}"
                                     for k, v in self.sysfs.items())
        return text

    def to_json(self):
        return {"name": self.name, "env": self.env, "allocators": self.allocators,
                "suites": self.suites, "peer": self.peer, "note": self.note,
                "load_probe_ok": self.verified, "context_shows_preload": self.context_shows_preload,
                "core": self.core, "sysfs": self.sysfs}


def one_gib_pages_needed(max_size):
    """1 GiB pages the largest hugetlb_1g row needs: its map is about 1.06x the working set."""
    return max(1, math.ceil(max_size * 1.07 / GiB))


def pool_of(facts, page_bytes):
    """The pool of `page_bytes` in `facts` (the binary's --machine-facts: {"page_bytes", "total",
    "free", "reserved", "available"}), or None. "free" counts pages reserved by mappings not yet
    faulted; "available" (free minus reserved) is what a new reservation can take: gate on it."""
    return next((p for p in facts.get("pools") or [] if p.get("page_bytes") == page_bytes), None)


def one_gib_pool_shortage(max_size, facts):
    """Why the hugetlb_1g configuration cannot run, in words, or "" when the 1 GiB pool holds the
    pages its largest row needs. Every 1 GiB configuration is gated on this. `facts`: what the
    binary reads (machine.machine_facts(): "cpu", "pool_sizes", "pools"); the runner reads no
    kernel file itself."""
    if "problem" in facts:
        return f"the machine facts could not be read ({facts['problem']})"
    if (facts.get("cpu") or {}).get("pdpe1gb") is False:
        return "this CPU has no 1 GiB pages (no pdpe1gb flag in /proc/cpuinfo)"
    if GiB not in (facts.get("pool_sizes") or []):
        return f"this kernel has no 1 GiB hugetlb pool ({POOL_1G_DIR} does not exist)"
    pool = pool_of(facts, GiB) or {}
    available = pool.get("available")  # free_hugepages - resv_hugepages
    if not isinstance(available, int):
        return (f"the 1 GiB pool could not be reserved ({POOL_1G_DIR}/free_hugepages is not "
                f"readable, or resv_hugepages)")
    need = one_gib_pages_needed(max_size)
    if available < need:
        total = pool.get("total")
        reserved = pool.get("reserved")
        held = f" ({reserved} more reserved by mappings)" if reserved else ""
        return (f"the 1 GiB pool could not be reserved: {available} free page(s){held} of "
                f"{'?' if total is None else total}, the largest working set needs {need} "
                f"(scripts/bench reserves them when root and memory is not too fragmented)")
    return ""


def find_library(soname, package, beside=None):
    """Path of a shared library: the directory `beside` first (a bundle's, scripts/bundle: the
    libraries sit next to hugepage_bench), then ldconfig's cache, then the Debian package's file
    list."""
    if beside is not None and (Path(beside) / soname).is_file():
        return str(Path(beside) / soname)
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.strip().startswith(soname + " ") and "x86-64" in line or \
                    line.strip().startswith(soname + " ") and "=>" in line:
                path = line.split("=>")[-1].strip()
                if os.path.exists(path):
                    return path
    except OSError:
        pass
    try:
        out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if os.path.basename(line) == soname and os.path.exists(line):
                return line
    except OSError:
        pass
    return None


def make_configs(args, registry):
    """(configurations, skipped): ours one per allocator, then the peers; `skipped` says in words
    why a configuration is not there (a missing library, no 1 GiB pool)."""
    # One process per allocator, ours as well as the peers': every row starts from a fresh process
    # with the same history (no containers of other rows built before it in the same heap), and the
    # rotation interleaves all of them alike.
    # --quick: only the allocators that have a quick suite (thp_prefault has FaultIn only).
    wanted = set(args.suites or (registry.quick() if args.quick else registry.names()))
    scenarios = getattr(args, "scenarios", False)
    ours_allocs = args.allocators or [
        a for a in registry.allocators
        if not (args.quick or scenarios) or wanted & set(registry.suites_of_allocator(a))]
    configs = []
    skipped = []
    # What the machine offers, as the binary reads it (configs and machine import each other's
    # names, so the function is imported here).
    from .machine import machine_facts
    facts = machine_facts(args.bench)
    if "hugetlb_1g" in ours_allocs:
        why = one_gib_pool_shortage(args.max_size, facts)
        if why:
            ours_allocs = [a for a in ours_allocs if a != "hugetlb_1g"]
            skipped.append(f"ours hugetlb_1g: {why}")
    for alloc in ours_allocs:
        if alloc == "thp_prefault" and "thp" in ours_allocs:
            continue  # measured beside thp, in its process (below)
        if alloc == "std":
            configs.append(Config("glibc", {}, ["std"], args.suites, peer=False, expect_huge=False, core=registry.core(),
                                  note="std rows = plain glibc malloc (the baseline)"))
        else:
            # thp_prefault shares thp's process: FaultIn is the only suite it has, and a process
            # whose first act is to fault in 1 GiB of THP pays the kernel's compaction for it
            # (seen here: 0.4-0.8 s instead of 0.1 s), which is not what pre-faulting costs.
            allocs = [alloc] + (["thp_prefault"] if alloc == "thp" and "thp_prefault" in ours_allocs
                                else [])
            configs.append(Config(f"ours {alloc}", {}, allocs, args.suites, peer=False,
                                  core=registry.core(),
                                  note=f"hugepage {', '.join(allocs)} under plain glibc"))
    if args.no_peers:
        return configs, skipped
    ps = args.peer_suites
    if scenarios or getattr(args, "thp_always", False):
        skipped += thp_always_configs(configs, ps, registry)
    configs.append(Config("glibc hugetlb=1", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, ["std"], ps,
                          peer=True, core=registry.peer_core(), note="glibc 2.35+: madvise(MADV_HUGEPAGE) on malloc's mmaps"))
    if not scenarios:  # the scenarios compare the THP tunable (=1) only
        configs.append(Config("glibc hugetlb=2", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2"}, ["std"], ps,
                              peer=True, core=registry.peer_core(), note="glibc 2.35+: MAP_HUGETLB from the default (2 MiB) pool"))
    beside = Path(os.path.abspath(args.bench)).parent
    je = find_library("libjemalloc.so.2", "libjemalloc2", beside)
    if je:
        # jemalloc 5.3 (Debian 12): opt.thp=always makes every extent madvise(MADV_HUGEPAGE) when
        # the system THP mode is madvise; metadata_thp:auto also puts its metadata on THP once it
        # grows (TUNING.md's suggestion). Names checked against the .so: an unknown name prints
        # "Invalid conf pair", which the probe below treats as a failure.
        configs.append(Config("jemalloc", {"LD_PRELOAD": je,
                                           "MALLOC_CONF": "thp:always,metadata_thp:auto"},
                              ["std"], ps, peer=True, lib=je, core=registry.peer_core(),
                              note="libjemalloc2 5.3, opt.thp=always + opt.metadata_thp=auto"))
    else:
        skipped.append("jemalloc: libjemalloc.so.2 not found (apt-get install libjemalloc2)")
    mi = find_library("libmimalloc.so.2", "libmimalloc2.0", beside)
    if mi:
        # mimalloc 2.0.x (Debian 12 ships 2.0.9): the option is `large_os_pages`, read from
        # MIMALLOC_LARGE_OS_PAGES. MIMALLOC_ALLOW_LARGE_OS_PAGES is the 2.1+ name: 2.0.x ignores it
        # (that is how the prototype's mimalloc row got no huge pages). With it, mimalloc tries
        # MAP_HUGETLB (2 MiB pool) for its segments and falls back to madvise(MADV_HUGEPAGE).
        # Its docs recommend reserving 1 GiB pages at start-up (MIMALLOC_RESERVE_HUGE_OS_PAGES=N)
        # "whenever possible": we do when the 1 GiB pool has free pages, sized for the largest
        # working set, and keep large OS pages on for whatever does not fit in that arena.
        env = {"LD_PRELOAD": mi, "MIMALLOC_LARGE_OS_PAGES": "1"}
        want_1g = max(1, math.ceil(2 * args.max_size / GiB))
        n_1g = min(want_1g, (pool_of(facts, GiB) or {}).get("available") or 0)
        if n_1g > 0:
            env["MIMALLOC_RESERVE_HUGE_OS_PAGES"] = str(n_1g)
        configs.append(Config("mimalloc", env, ["std"], ps, peer=True, lib=mi, core=registry.peer_core(),
                              note="libmimalloc2.0 2.0.x, large OS pages"
                                   + (f" + {n_1g} reserved 1 GiB page(s)" if n_1g else "")))
    else:
        skipped.append("mimalloc: libmimalloc.so.2 not found (apt-get install libmimalloc2.0)")
    return choose_peers(configs, skipped, getattr(args, "peers", None))


def choose_peers(configs, skipped, names):
    """--peers: only the peer configurations named (None: all of them). A name that is no peer
    configuration of this run, made or skipped, raises ValueError saying which there are."""
    if names is None:
        return configs, skipped
    known = list(dict.fromkeys([c.name for c in configs if c.peer]
                               + [s.split(":", 1)[0] for s in skipped
                                  if not s.startswith("ours ")]))
    for name in names:
        if name not in known:
            raise ValueError(f"--peers: unknown peer '{name}' ({', '.join(known)})")
    kept = [c for c in configs if not c.peer or c.name in names]
    skipped = skipped + [f"{c.name}: not in --peers" for c in configs if c not in kept]
    return kept, skipped


# khugepaged at a faster pace than its defaults (10 s between passes of 4096 pages): a pass of
# 32768 pages (128 MiB) every 100 ms, for Scenario_SparseIdle.
FAST_KHUGEPAGED = {sysfs.KHUGEPAGED_SLEEP: "100", sysfs.KHUGEPAGED_PAGES: "32768"}
SPARSE_IDLE = "Scenario_SparseIdle"


def thp_always_configs(configs, peer_suites, registry, why_not=sysfs.why_not):
    """--scenarios or --thp-always: appends the configurations that run under THP `always`
    machine-wide (std rows, plain glibc), and returns why any is left out (not root, no such
    file)."""
    always = {sysfs.THP_ENABLED: "always"}
    fast = dict(always, **FAST_KHUGEPAGED)
    why = why_not(fast)
    if why:
        return [f"thp always: {why}"] + ([f"thp always fast khugepaged: {why}"]
                                          if SPARSE_IDLE in (peer_suites or []) else [])
    configs.append(Config("thp always", {}, ["std"], peer_suites, peer=True, sysfs=always,
                          core=registry.peer_core(),
                          note="THP enabled=always machine-wide for this process, then restored"))
    if SPARSE_IDLE in (peer_suites or []):
        configs.append(Config("thp always fast khugepaged", {}, ["std"], [SPARSE_IDLE], peer=True,
                              sysfs=fast, core=registry.peer_core(),
                              note="THP always and khugepaged every 100 ms, 32768 pages a pass, "
                                   "then restored"))
    return []


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(MALLOC_ENV_PREFIXES)}
    env.update(extra)
    return env


def probe(config):
    """Proves that a peer is loaded with the options it was given. Returns (ok, text)."""
    lines = []
    ok = True
    env = clean_env(config.env)
    if config.lib:
        maps = subprocess.run(["cat", "/proc/self/maps"], env=env, capture_output=True,
                              text=True).stdout
        real = os.path.realpath(config.lib)
        loaded = any(real in line or config.lib in line for line in maps.splitlines())
        lines.append(f"/proc/self/maps of a probe process maps {real}: {'yes' if loaded else 'NO'}")
        ok &= loaded
    if "MALLOC_CONF" in config.env:
        env2 = dict(env, MALLOC_CONF=config.env["MALLOC_CONF"] + ",stats_print:true")
        r = subprocess.run(["true"], env=env2, capture_output=True, text=True)
        opts = [l.strip() for l in r.stderr.splitlines()
                if re.match(r"\s*(Version|opt\.(thp|metadata_thp|retain|background_thread))", l)]
        bad = [l for l in r.stderr.splitlines() if "Invalid conf" in l]
        lines += opts + bad
        ok &= not bad and any('opt.thp: "always"' in l for l in opts)
    if any(k.startswith("MIMALLOC_") for k in config.env):
        env2 = dict(env, MIMALLOC_VERBOSE="1")
        r = subprocess.run(["true"], env=env2, capture_output=True, text=True)
        opts = [l.strip() for l in r.stderr.splitlines()
                if re.search(r"option '(large_os_pages|reserve_huge_os_pages|eager_commit)'", l)
                or "huge" in l.lower() and "option" not in l]
        lines += opts
        ok &= any("'large_os_pages': 1" in l for l in opts)
    if "GLIBC_TUNABLES" in config.env:
        ldso = next((p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1")
                     if os.path.exists(p)), None)
        if ldso:
            r = subprocess.run([ldso, "--list-tunables"], env=env, capture_output=True, text=True)
            t = [l.strip() for l in r.stdout.splitlines() if "malloc.hugetlb" in l]
            lines += t or ["glibc.malloc.hugetlb: not a tunable of this glibc (needs 2.35+)"]
            want = config.env["GLIBC_TUNABLES"].rsplit("=", 1)[-1]
            ok &= any(f": 0x{int(want):x} " in l for l in t)
    return ok, "\n".join("    " + l for l in lines)
