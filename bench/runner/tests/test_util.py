"""The runner's size grammar (runner.util.parse_size, parse_size_list) and --sizes on its command
line: the cases hugepage_bench is held to as well (size_cases, check_flags)."""

import argparse
import io
import os
import unittest
import unittest.mock
from contextlib import redirect_stdout

from runner import cli
from runner.util import parse_size, parse_size_list

from . import size_cases


class SizeGrammar(unittest.TestCase):
    def test_accepted(self):
        for text, size in size_cases.ACCEPTED.items():
            with self.subTest(text=text):
                self.assertEqual(parse_size(text), size)

    def test_refused(self):
        for text in size_cases.REFUSED:
            with self.subTest(text=text):
                with self.assertRaises(argparse.ArgumentTypeError) as e:
                    parse_size(text)
                self.assertEqual(str(e.exception),
                                 f"bad size '{text}' (e.g. 4M, 256MiB, 1.5G, 4096)")

    def test_lists(self):
        for text, sizes in size_cases.LISTS_ACCEPTED.items():
            with self.subTest(text=text):
                self.assertEqual(parse_size_list(text), sizes)
        for text, message in size_cases.LISTS_REFUSED.items():
            with self.subTest(text=text):
                with self.assertRaises(argparse.ArgumentTypeError) as e:
                    parse_size_list(text)
                self.assertEqual(str(e.exception), message)


class SizesFlag(unittest.TestCase):
    def test_sizes(self):
        args = cli.parse_args(["--sizes", "4M,64M,1G"])
        self.assertEqual(args.sizes, [4 << 20, 64 << 20, 1 << 30])
        self.assertEqual(args.sizes_text, ["4M", "64M", "1G"])
        self.assertIsNone(cli.parse_args([]).sizes)

    def test_empty_list_or_element_is_an_error(self):
        for argv, message in ((["--sizes="], "--sizes= names no size"),
                              (["--sizes", ""], "--sizes= names no size"),
                              (["--sizes=4M,,64M"], "empty size in --sizes=4M,,64M"),
                              (["--sizes=,4M"], "empty size in --sizes=,4M"),
                              (["--sizes=4M,"], "empty size in --sizes=4M,")):
            with self.subTest(argv=argv):
                err = io.StringIO()
                with self.assertRaises(SystemExit) as e, redirect_stdout(io.StringIO()), \
                        unittest.mock.patch("sys.stderr", err):
                    cli.parse_args(argv)
                self.assertEqual(e.exception.code, 2)
                self.assertIn(f"--sizes: {message}", err.getvalue())


class NameListFlags(unittest.TestCase):
    def test_empty_list_or_element_is_an_error(self):
        for (flag, text), message in size_cases.NAME_LISTS_REFUSED.items():
            with self.subTest(flag=flag, text=text):
                err = io.StringIO()
                with self.assertRaises(SystemExit) as e, redirect_stdout(io.StringIO()), \
                        unittest.mock.patch("sys.stderr", err):
                    cli.parse_args([f"{flag}={text}"])
                self.assertEqual(e.exception.code, 2)
                self.assertIn(f"{flag}: {message}\n", err.getvalue())

    def test_names_are_kept(self):
        args = cli.parse_args(["--suites=Map_Lookup,BM_FlatHashMap_Lookup", "--allocators=std"])
        self.assertEqual(args.suites, ["Map_Lookup", "FlatHashMap_Lookup"])
        self.assertEqual(args.allocators, ["std"])
        self.assertIsNone(cli.parse_args([]).suites)
        # As the binary reads them: a space is part of the name (then unknown), not trimmed.
        self.assertEqual(cli.parse_args(["--suites=Map_Lookup, X"]).suites, ["Map_Lookup", " X"])

    def test_a_cpu_this_process_may_not_run_on_is_an_error(self):
        missing = max(os.sched_getaffinity(0)) + 1
        if missing > 1023:
            self.skipTest("every CPU number is this process's")
        err = io.StringIO()
        with self.assertRaises(SystemExit) as e, redirect_stdout(io.StringIO()), \
                unittest.mock.patch("sys.stderr", err):
            cli.parse_args([f"--cpu={missing}"])
        self.assertEqual(e.exception.code, 2)
        self.assertIn(f"cannot pin to CPU {missing}: not one this process may run on",
                      err.getvalue())
        self.assertEqual(cli.parse_args([f"--cpu={min(os.sched_getaffinity(0))}"]).cpu,
                         min(os.sched_getaffinity(0)))

    def test_empty_paired_size_is_an_error(self):
        err = io.StringIO()
        with self.assertRaises(SystemExit) as e, redirect_stdout(io.StringIO()), \
                unittest.mock.patch("sys.stderr", err):
            cli.parse_args(["--paired-size="])
        self.assertEqual(e.exception.code, 2)
        self.assertIn("--paired-size: bad size ''", err.getvalue())


if __name__ == "__main__":
    unittest.main()
