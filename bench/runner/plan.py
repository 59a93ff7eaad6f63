"""Planning: which rounds run what, and the command line of one run.

Rounds interleave the configurations (round r runs every configuration once, in an order rotated
by r), so drift of the machine (other tenants, frequency, memory fragmentation) hits all alike.
Every round runs the core suites (the registry's `core`); the other suites run in the heavy
rounds only. What costs time is building the containers again in every process (a 1 GiB map
takes seconds to fill), so the budget is spent where the question is.
"""

from .util import fmt_size, size_flag


def spread_rounds(n, rounds):
    """n of the rounds 1..rounds, evenly spread (first and last included), so that a subset of
    rounds still sees the drift of the whole run."""
    n = max(0, min(n, rounds))
    if n == 0:
        return set()
    if n == 1:
        return {1}
    return {1 + round(i * (rounds - 1) / (n - 1)) for i in range(n)}


def suites_for_round(args, config, rnd, registry):
    """The suites a configuration runs in round rnd, in registry order; [] = skip the run."""
    if config.peer and rnd not in args.peer_round_set:
        return []
    suites = config.suites or (registry.quick() if args.quick else registry.names())
    if rnd not in args.heavy_round_set:
        suites = [s for s in suites if s in config.core]
    if rnd != 1 and not args.quick:
        # Slow to repeat (one FlatHashMap_Build row fills maps of every size up to 1 GiB), and
        # repeating it would push the default run past its budget on a 2-core machine.
        suites = [s for s in suites if s not in registry.first_round_only()]
    only = {s for a in config.allocators for s in registry.suites_of_allocator(a)}
    return [s for s in suites if s in only]


def split_processes(suites, registry, args):
    """The processes one configuration's run is made of: [(suites, part, size)]. The main one has
    part "" and size None (the run's sizes). A suite that measures what the process holds
    (own_process) gets a process per working set, part "<suite>-<size>", so that no row before it
    (another suite, or the same suite at a smaller size) leaves memory the allocator reuses."""
    own = set(registry.own_process())
    shared = [s for s in suites if s not in own]
    out = [(shared, "", None)] if shared else []
    for name in suites:
        if name not in own:
            continue
        suite = registry.get(name)
        sizes = args.sizes or (suite.quick_sizes if args.quick else suite.sizes)
        out += [([name], f"{name}-{size}", size) for size in sizes]
    return out


# The paired run after the rounds: a full run at 1 GiB (where the lookup targets apply) for at
# least 15 rounds and until a minute of rounds per row (a paired ratio near 1.00 moves by about 5%
# from round to round on a small VM); --quick at 64 MiB, 3 rounds, so that CI exercises the path.
PAIRED_SIZE = 1 << 30
PAIRED_QUICK_SIZE = 64 << 20
PAIRED_ROUNDS = 15
PAIRED_QUICK_ROUNDS = 3
PAIRED_ROUND_SECONDS = 60


def paired_plan(args, registry):
    """(suites, size, rounds, round seconds, "") when this run takes the paired step, else
    (None, None, None, None, why not). It runs the registry's pairable suites (those --suites
    names, when given) unless --no-paired, at --paired-size, else the largest of --sizes when a
    pairable suite has a default size that small or smaller, else 1 GiB (--quick: 64 MiB)."""
    none = lambda why: (None, None, None, None, why)
    if args.no_paired:
        return none("--no-paired")
    if getattr(args, "scenarios", False):
        return none("--scenarios")
    suites = registry.pairable()
    if args.suites_given:
        suites = [s for s in suites if s in args.suites_given]
        if not suites:
            return none("--suites names no suite with a paired mode (hugepage_bench --list)")
    if not suites:
        return none("no suite has a paired mode")
    rounds = args.paired_rounds or (PAIRED_QUICK_ROUNDS if args.quick else PAIRED_ROUNDS)
    seconds = 0 if args.quick else PAIRED_ROUND_SECONDS
    if args.paired_size:
        return suites, args.paired_size, rounds, seconds, ""
    if args.sizes:
        smallest = min(min(registry.get(s).sizes + registry.get(s).quick_sizes) for s in suites)
        largest = max(args.sizes)
        if largest < smallest:
            return none(f"--sizes ends at {fmt_size(largest)}, below the paired suites' smallest "
                        f"size ({fmt_size(smallest)})")
        return suites, largest, rounds, seconds, ""
    return suites, (PAIRED_QUICK_SIZE if args.quick else PAIRED_SIZE), rounds, seconds, ""


def rotation(configs, rnd):
    """The configurations in the order round rnd runs them."""
    k = (rnd - 1) % len(configs)
    return configs[k:] + configs[:k]


def bench_command(args, config, json_path, suites, bench=None, size=None, paired=None):
    """The command line of one run; `json_path` and `bench` as they should be written (the
    runner runs it from the output directory, so both can be relative to it); `size`: this one
    working set (bytes) instead of the run's; `paired`: (rounds, round seconds) of a paired run
    (--paired: the suites' contenders in one process)."""
    cmd = [str(bench or args.bench)]
    if paired:
        cmd += ["--paired", f"--rounds={paired[0]}"]
        if paired[1]:
            cmd.append(f"--round-seconds={paired[1]}")
    elif args.quick:
        cmd.append("--quick")
    if size is not None:
        cmd.append(f"--sizes={size_flag(size)}")
    elif args.sizes:
        cmd.append("--sizes=" + ",".join(size_flag(s) for s in args.sizes))
    if suites:
        cmd.append("--suites=" + ",".join(suites))
    if not paired:
        cmd.append("--allocators=" + ",".join(config.allocators))
    if args.cpu is not None:
        cmd.append(f"--cpu={args.cpu}")
    if not any(a.startswith("--benchmark_repetitions") for a in args.extra):
        cmd.append("--benchmark_repetitions=1")
    if not args.quick and args.min_time and \
            not any(a.startswith("--benchmark_min_time") for a in args.extra):
        cmd.append(f"--benchmark_min_time={args.min_time}")
    cmd += [f"--benchmark_out={json_path}", "--benchmark_out_format=json"]
    cmd += args.extra
    return cmd
