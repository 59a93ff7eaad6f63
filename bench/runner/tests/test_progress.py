import unittest

from runner import plan, progress

from . import fixtures


class Estimator(unittest.TestCase):
    def setUp(self):
        # Two configurations, three rounds; round 1 is heavy (more suites) for both.
        heavy, light = ("A", "B"), ("A",)
        self.plan = [("glibc", heavy, ""), ("ours", heavy, ""),
                     ("glibc", light, ""), ("ours", light, ""),
                     ("glibc", light, ""), ("ours", light, "")]

    def test_no_estimate_before_the_first_run(self):
        p = progress.Progress(self.plan, paired_s=100)
        self.assertIsNone(p.left_s())
        self.assertEqual(p.line(0), "0/6 runs, 0s elapsed, time left: estimated after the first "
                                    "run")

    def test_runs_left_times_the_mean_of_their_kind_then_configuration_then_all(self):
        p = progress.Progress(self.plan, paired_s=100)
        p.finished(self.plan[0], 30.0)
        # Nothing of "ours" yet: every run left takes the mean of all (30 s); 5 left.
        self.assertEqual(p.rounds_left_s(), 5 * 30.0)
        self.assertEqual(p.left_s(), 5 * 30.0 + 100)
        p.finished(self.plan[1], 50.0)
        # Light runs of a configuration not seen light: that configuration's mean.
        self.assertEqual(p.rounds_left_s(), 30 + 50 + 30 + 50)
        p.finished(self.plan[2], 10.0)
        p.finished(self.plan[3], 20.0)
        # Seen light: the mean of that kind, refined as runs finish.
        self.assertEqual(p.rounds_left_s(), 10 + 20)
        p.finished(self.plan[4], 14.0)
        self.assertEqual(p.rounds_left_s(), 20)
        self.assertEqual(p.line(125), "5/6 runs, 2m05s elapsed, about 2m00s left (paired run "
                                      "included: about 1m40s)")
        p.finished(self.plan[5], 20.0)
        self.assertEqual(p.left_s(), 100)

    def test_without_a_paired_run(self):
        p = progress.Progress(self.plan[:2])
        p.finished(self.plan[0], 61.0)
        self.assertEqual(p.line(61), "1/2 runs, 1m01s elapsed, about 1m01s left")
        p.finished(self.plan[1], 3.0)
        self.assertEqual(p.left_s(), 0)

    def test_paired_estimate_from_rounds_and_round_seconds(self):
        # The default: 6 rows at 1 GiB, 15 rounds, 60 s of rounds per row; measured 636 s.
        self.assertEqual(progress.paired_estimate(6, 1 << 30, 15, 60), 6 * (60 + 46))
        # --quick: 3 rounds and no minimum time, at 64 MiB.
        self.assertAlmostEqual(progress.paired_estimate(6, 64 << 20, 3, 0), 6 * (3 + 46 / 16))
        # More rounds than the round seconds cover.
        self.assertEqual(progress.paired_estimate(1, 0, 100, 60), 100)

    def test_durations(self):
        self.assertEqual(progress.fmt_duration(0.4), "0s")
        self.assertEqual(progress.fmt_duration(59.6), "1m00s")
        self.assertEqual(progress.fmt_duration(636), "10m36s")
        self.assertEqual(progress.fmt_duration(3725), "1h02m")


class PlanOfARun(unittest.TestCase):
    """The kinds the runner plans from (cli.run_kind over plan.split_processes) for a fake
    registry: heavy and light rounds differ, so their processes are of different kinds."""

    def test_kinds_of_a_fake_plan(self):
        from runner import cli
        reg = fixtures.registry()
        args = fixtures.args()
        cfgs = fixtures.configs(reg)
        kinds = [cli.run_kind(c, group, part)
                 for rnd in range(1, args.rounds + 1)
                 for c in plan.rotation(cfgs, rnd)
                 for group, part, _ in plan.split_processes(
                     plan.suites_for_round(args, c, rnd, reg), reg, args)]
        self.assertTrue(kinds)
        p = progress.Progress(kinds)
        p.finished(kinds[0], 8.0)
        self.assertEqual(p.rounds_left_s(), 8.0 * (len(kinds) - 1))
        self.assertEqual(kinds[0][0], plan.rotation(cfgs, 1)[0].name)


class Stopping(unittest.TestCase):
    """SIGTERM during the rounds (run-large.sh's budget): the runs that finished are kept, the
    one running is left out, and the handler that was there before is back."""

    def test_sigterm_ends_the_rounds_with_what_finished(self):
        import os
        import signal
        from types import SimpleNamespace

        from runner import cli

        cfgs = [SimpleNamespace(name=n) for n in ("glibc", "ours", "jemalloc")]
        planned = [(1, c, ["A"], "", None) for c in cfgs]
        calls = []

        def fake_run(args, c, rnd, out_dir, group, part, size):
            calls.append(c.name)
            if c.name == "jemalloc":
                os.kill(os.getpid(), signal.SIGTERM)  # as timeout(1) sends it
                self.fail("the signal did not stop the run")
            return SimpleNamespace(wall_s=1.0, rc=0)

        before = signal.getsignal(signal.SIGTERM)
        p = progress.Progress([cli.run_kind(c, g, part) for _, c, g, part, _ in planned])
        runs, stopped, _ = cli.run_rounds(SimpleNamespace(rounds=1), planned, None, p, fake_run)
        self.assertTrue(stopped)
        self.assertEqual(len(runs), 2)
        self.assertEqual(calls, ["glibc", "ours", "jemalloc"])
        self.assertIs(signal.getsignal(signal.SIGTERM), before)
        # Without a signal every run is kept.
        runs, stopped, _ = cli.run_rounds(SimpleNamespace(rounds=1), planned[:2], None,
                                          progress.Progress([]), fake_run)
        self.assertEqual((len(runs), stopped), (2, False))
