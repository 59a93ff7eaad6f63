"""The machine header: what the benchmark's JSON context says (CPU, kernel, THP, pools, counters,
the dTLB encoding cross-check), and where the context is silent, what the binary says the library
reads (`hugepage_bench --machine-facts --json`): the runner reads no kernel file itself."""

import json
import os
import platform
import subprocess

from .configs import MALLOC_ENV_PREFIXES, clean_env
from .util import fmt_num, fmt_size, log, size_flag


GB_STD_CONTEXT = {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu",
                  "cpu_scaling_enabled", "caches", "load_avg", "library_build_type", "json_schema_version"}


def measure_headroom(bench, sizes, cpu=None):
    """`bench --headroom` at `sizes`: {"method", "rows": [{working_set, base_ns, huge_ns, ...}]},
    or {"problem": why} in words."""
    cmd = [str(bench), "--headroom"] + (["--sizes=" + ",".join(size_flag(s) for s in sizes)]
                                        if sizes else [])
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    try:
        r = subprocess.run(cmd, env=clean_env({}), capture_output=True, text=True, timeout=600,
                           preexec_fn=pin)
        data = json.loads(r.stdout)
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        log(f"headroom: {e}")
        return {"problem": f"{' '.join(cmd)}: {e}"}
    return data


def machine_facts(bench):
    """`bench --machine-facts --json`: {"kernel", "thp": {"mode", "enabled", "pmd_enabled",
    "defrag", "pmd_bytes"}, "cpu": {"model", "pdpe1gb"}, "pool_sizes": [page_bytes],
    "pools": [{"page_bytes", "total", "free", "reserved", "available"}]}, or {"problem": why}
    ("free" counts reserved pages; "available" is free minus reserved)."""
    cmd = [str(bench), "--machine-facts", "--json"]
    try:
        r = subprocess.run(cmd, env=clean_env({}), capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise ValueError(f"exit status {r.returncode}: {r.stderr.strip()}")
        data = json.loads(r.stdout)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        log(f"machine facts: {e}")
        return {"problem": f"{' '.join(cmd)}: {e}"}
    return data


def facts_lines(facts, keys):
    """What `facts` (machine_facts()) adds to a header whose context has `keys` (lower case):
    {name: text} for the kernel, THP and pools where the context says nothing of them."""
    own = {}
    if "problem" in facts:
        if "kernel" not in keys or "thp" not in keys:
            own["machine facts"] = f"not read ({facts['problem']})"
        return own
    if "kernel" not in keys:
        own["kernel"] = facts.get("kernel") or "?"
    if "thp" not in keys:
        thp = facts.get("thp") or {}
        switch = thp.get("pmd_enabled")
        own["thp"] = (f"{thp.get('mode') or '?'} for 2 MiB pages (enabled={thp.get('enabled') or '?'}"
                      + (f", hugepages-2048kB/enabled={switch}" if switch else "")
                      + f") defrag={thp.get('defrag') or '?'}")
    if "pool" not in keys and "hugetlb" not in keys:
        own["hugetlb pools"] = "; ".join(
            f"{fmt_size(p['page_bytes'])}: {_count(p.get('total'))} total, "
            f"{_count(p.get('free'))} free" for p in facts.get("pools") or [])
    return own


def _count(n):
    return "?" if n is None else str(n)


def headroom_line(headroom):
    """The headroom for the header: ns per dependent load, base pages / huge pages, per size."""
    if not headroom:
        return None
    if "problem" in headroom:
        return f"  headroom: not measured ({headroom['problem']})"
    parts = []
    for row in headroom.get("rows", []):
        if "error" in row:
            parts.append(f"{fmt_size(row['working_set'])} not measured ({row['error']})")
            continue
        ratio = row["base_ns"] / row["huge_ns"] if row["huge_ns"] else 0
        parts.append(f"{fmt_size(row['working_set'])} {fmt_num(row['base_ns'])}/"
                     f"{fmt_num(row['huge_ns'])} ns = {ratio:.2f}x"
                     + ("" if row.get("huge_huge_pct", 100) >= 90 else
                        f" (huge buffer only {row['huge_huge_pct']:.0f}% huge)"))
    return ("  headroom (ns per dependent load over a random cycle, base/huge pages, as "
            "hugepage-doctor --probe): " + "; ".join(parts))


def machine_lines(context, args):
    lines = []
    custom = {k: v for k, v in (context or {}).items()
              if k not in GB_STD_CONTEXT and not k.startswith(MALLOC_ENV_PREFIXES)}
    keys = " ".join(custom).lower()
    # What the binary reads, for whatever the benchmark's context does not say.
    own = {}
    by_runner = set()  # keys the runner had to fill in itself
    need_cpu = "cpu" not in keys and "model" not in keys
    if need_cpu or "kernel" not in keys or "thp" not in keys or (
            "pool" not in keys and "hugetlb" not in keys):
        facts = getattr(args, "machine_facts", None)
        if facts is None:
            facts = machine_facts(args.bench) if getattr(args, "bench", None) else {
                "problem": "no benchmark binary to ask"}
        if need_cpu:
            own["cpu_model"] = (facts.get("cpu") or {}).get("model")
            if not own["cpu_model"]:
                own["cpu_model"] = platform.processor()
                by_runner.add("cpu_model")
        own.update(facts_lines(facts, keys))
    for k, v in custom.items():
        lines.append(f"  {k}: {v}")
    for k, v in own.items():
        lines.append(f"  {k}: {v}  ({'read by run.py' if k in by_runner else 'hugepage_bench --machine-facts'})")
    headroom = headroom_line(getattr(args, "headroom", None))
    if headroom:
        lines.append(headroom)
    if context:
        caches = context.get("caches") or []
        cache_txt = ", ".join(f"L{c.get('level')}{c.get('type', '')[0:1].lower()} "
                              f"{fmt_size(c.get('size', 0))}" for c in caches)
        lines.append(f"  cpus: {context.get('num_cpus')} at {context.get('mhz_per_cpu')} MHz"
                     + (f"; caches: {cache_txt}" if cache_txt else "")
                     + f"; host {context.get('host_name')}; load avg {context.get('load_avg')}")
    return lines
