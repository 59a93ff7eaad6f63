#!/usr/bin/env python3
"""scripts/lab refuses bad input before it installs, builds or boots anything: each case below
exits with status 1 and one error line naming what is wrong. Run by the ctest Lab.Input:
`python3 -m unittest scripts/lab_input_test.py` from the repository root."""

import os
import pathlib
import subprocess
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADER = "# name arch suite kernel nodes memory thp mthp pools cmdline sets\n"
GOOD = "x86-good amd64 bookworm linux-image-cloud-amd64 1 3072 - - 2M=256 - full"


def lab(*args, guests=None):
    """Runs scripts/lab with `args` (and `guests` as its guests file): (status, stderr)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as scratch:
        env["HUGEPAGE_LAB_CACHE"] = scratch + "/cache"  # never the real cache
        env["HUGEPAGE_LAB_OUT"] = scratch + "/out"
        if guests is not None:
            path = pathlib.Path(scratch) / "guests"
            path.write_text(HEADER + guests + "\n")
            env["HUGEPAGE_LAB_GUESTS"] = str(path)
        done = subprocess.run([str(ROOT / "scripts/lab"), *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        booted = pathlib.Path(scratch, "out").exists()
    return done.returncode, done.stderr, booted


class Refuses(unittest.TestCase):
    def refused(self, words, *args, guests=None):
        status, err, booted = lab(*args, guests=guests)
        self.assertEqual(status, 1, err)
        self.assertIn("error: ", err)
        self.assertIn(words, err)
        self.assertFalse(booted, "it went on past the bad input")

    def test_an_env_name_that_is_no_shell_name(self):
        for bad in ("A B=1", "X;echo INJECTED >&2;Y=2", "1A=2", "A$(id)=1", "=x", "FOO"):
            with self.subTest(env=bad):
                self.refused("--env needs NAME=VALUE", "--guest", "x86-5.10", "--env", bad,
                             "--list")

    def test_a_test_executable_that_does_not_exist(self):
        self.refused("--tests: no test executable nosuch_test", "--tests", "nosuch_test")
        self.refused("no test executable ../etc", "--tests", "allocator_test,../etc")

    def test_a_with_file_that_is_not_there_or_without_run(self):
        self.refused("--with: no such file /nonexistent/doctor", "--guest", "x86-5.10", "--with",
                     "/nonexistent/doctor", "--run", "/bin/true")
        self.refused("--with goes with --run", "--guest", "x86-5.10", "--with", "/bin/true",
                     "--list")

    def test_a_guests_file_that_is_not_there(self):
        env = dict(os.environ, HUGEPAGE_LAB_GUESTS="/nonexistent/guests")
        done = subprocess.run([str(ROOT / "scripts/lab"), "--list"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("error: no guests file /nonexistent/guests", done.stderr)

    def test_bad_values_in_a_guests_line(self):
        columns = GOOD.split()
        cases = {
            4: ("zero", "nodes 'zero'"),
            5: ("lots", "memory 'lots'"),
            6: ("sometimes", "thp 'sometimes'"),
            7: ("3M=often", "mthp '3M=often'"),
            8: ("2M=many", "pools '2M=many'"),
            9: ("a;reboot", "cmdline 'a;reboot'"),
            10: ("nightly", "sets 'nightly'"),
            2: ("book$(id)", "suite 'book$(id)'"),
        }
        for column, (value, words) in cases.items():
            line = columns.copy()
            line[column] = value
            with self.subTest(column=column, value=value):
                self.refused(words, "--list", guests=" ".join(line))

    def test_a_guest_declared_twice(self):
        self.refused("x86-good is declared twice", "--list", guests=GOOD + "\n" + GOOD)

    def test_a_line_of_the_wrong_width(self):
        self.refused("needs 11 columns", "--list", guests=GOOD + " extra")

    def test_the_good_line_is_listed(self):
        status, err, booted = lab("--list", guests=GOOD)
        self.assertEqual(status, 0, err)
        self.assertFalse(booted)


if __name__ == "__main__":
    unittest.main()
