"""The time a run has left, said after every finished process: from the plan (every process of
the rounds, in the order they run, and the paired run after them) and the durations of the
processes that finished.

A process left to run is estimated by the mean duration of the finished processes of the same
kind (configuration, suites and part: a heavy round runs more suites than the others), else of
the same configuration, else of all; with none finished yet there is no estimate. The paired run
is one process that reports nothing until it ends, so it is estimated from its plan: per row
(pairable suite), its round seconds or its rounds at ROUND_S each, whichever is longer, plus the
builds of its contenders at BUILD_S_PER_GIB per GiB of working set.
"""

# The paired run of a default run on the 2-core VM (6 rows at 1 GiB, 15 rounds, 60 s of rounds
# per row) took 636 s: 360 s of rounds, the rest building the contenders' containers.
ROUND_S = 1.0
BUILD_S_PER_GIB = 46.0


def paired_estimate(rows, size, rounds, round_seconds):
    """Seconds the paired run is expected to take: `rows` pairable suites at `size` bytes."""
    per_row = max(round_seconds, rounds * ROUND_S) + BUILD_S_PER_GIB * size / (1 << 30)
    return rows * per_row


def fmt_duration(seconds):
    """45s, 3m05s, 1h02m."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """`planned`: one kind per process of the rounds, in the order they run; a kind is a tuple
    whose first element is the configuration's name. `paired_s`: the paired run's estimate in
    seconds (None when it does not run)."""

    def __init__(self, planned, paired_s=None):
        self.planned = list(planned)
        self.paired_s = paired_s
        self.durations = []  # (kind, seconds) of the finished processes, in order

    def finished(self, kind, seconds):
        self.durations.append((kind, seconds))

    def estimate(self, kind):
        """Seconds a process of `kind` is expected to take, None before any process finished."""
        for same in (lambda k: k == kind, lambda k: k[0] == kind[0], lambda k: True):
            seen = [s for k, s in self.durations if same(k)]
            if seen:
                return sum(seen) / len(seen)
        return None

    def rounds_left_s(self):
        """Seconds the processes of the rounds not yet run should take (None: no estimate)."""
        left = self.planned[len(self.durations):]
        if not left:
            return 0.0
        guesses = [self.estimate(k) for k in left]
        return None if None in guesses else sum(guesses)

    def left_s(self):
        rounds = self.rounds_left_s()
        if rounds is None:
            return None
        return rounds + (self.paired_s or 0)

    def line(self, elapsed_s):
        """'5/59 runs, 3m12s elapsed, about 14m40s left (paired run included: about 10m36s)'."""
        done, total = len(self.durations), len(self.planned)
        head = f"{done}/{total} runs, {fmt_duration(elapsed_s)} elapsed"
        left = self.left_s()
        if left is None:
            return head + ", time left: estimated after the first run"
        paired = (f" (paired run included: about {fmt_duration(self.paired_s)})"
                  if self.paired_s else "")
        return head + f", about {fmt_duration(left)} left" + paired
