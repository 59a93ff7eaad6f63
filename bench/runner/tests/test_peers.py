import contextlib
import io
import os
import tempfile
import unittest

from runner import cli, configs
from runner.configs import Config


PEERS = ("glibc hugetlb=1", "glibc hugetlb=2", "jemalloc", "mimalloc")


class ChoosePeers(unittest.TestCase):
    def setUp(self):
        self.all = [Config("glibc", {}, ["std"], None, peer=False),
                    Config("ours thp", {}, ["thp"], None, peer=False)] + \
                   [Config(n, {}, ["std"], None, peer=True) for n in PEERS]

    def test_all_peers_by_default(self):
        self.assertEqual(configs.choose_peers(self.all, ["x"], None), (self.all, ["x"]))

    def test_only_the_named_peers_and_all_of_ours(self):
        kept, skipped = configs.choose_peers(self.all, [], ["jemalloc", "mimalloc"])
        self.assertEqual([c.name for c in kept], ["glibc", "ours thp", "jemalloc", "mimalloc"])
        self.assertEqual(skipped, ["glibc hugetlb=1: not in --peers",
                                   "glibc hugetlb=2: not in --peers"])

    def test_a_name_that_is_no_peer_of_this_run_is_an_error(self):
        with self.assertRaises(ValueError) as e:
            configs.choose_peers(self.all, ["mimalloc: not found"], ["tcmalloc"])
        self.assertEqual(str(e.exception), "--peers: unknown peer 'tcmalloc' (glibc hugetlb=1, "
                                           "glibc hugetlb=2, jemalloc, mimalloc)")
        # A peer skipped for a missing library is known: left out, no error.
        kept, _ = configs.choose_peers(self.all[:-1], ["mimalloc: not found"], ["mimalloc"])
        self.assertEqual([c.name for c in kept], ["glibc", "ours thp"])

    def test_flag(self):
        self.assertEqual(cli.parse_args(["--peers", "jemalloc,glibc hugetlb=1"]).peers,
                         ["jemalloc", "glibc hugetlb=1"])
        self.assertIsNone(cli.parse_args([]).peers)
        err = io.StringIO()
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(err):
            cli.parse_args(["--peers", "jemalloc,"])
        self.assertEqual(e.exception.code, 2)
        self.assertIn("--peers: empty name in --peers=jemalloc,", err.getvalue())


class FindLibrary(unittest.TestCase):
    def test_a_library_beside_the_binary_comes_first(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "libjemalloc.so.2")
            open(path, "w").close()
            self.assertEqual(configs.find_library("libjemalloc.so.2", "libjemalloc2", d), path)
            # Not there: the system's (or None), never a path in d.
            found = configs.find_library("libmimalloc.so.2", "libmimalloc2.0", d)
            self.assertTrue(found is None or not found.startswith(d))
