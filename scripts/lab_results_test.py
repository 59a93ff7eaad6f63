#!/usr/bin/env python3
"""Tests of scripts/lab_results.py on hand-made guest logs. Run by the ctest Lab.Results:
`python3 -m unittest scripts/lab_results_test.py` from the repository root."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import lab_results  # noqa: E402  pylint: disable=wrong-import-position

FACTS = """\
@@lab fact kernel 6.12.117+deb13-arm64-16k
@@lab fact arch aarch64
@@lab fact page 16384
@@lab fact pmd 33554432
@@lab fact thp madvise
@@lab fact hugetlb 1048576kB:0 2048kB:256 32768kB:0
@@lab fact mthp hugepages-64kB:always
@@lab fact nodes 1
"""

GTEST = """\
@@lab begin allocator_test
Running main() from ./googletest/src/gtest_main.cc
[==========] Running 3 tests from 1 test suite.
\x1b[0;32m[ RUN      ] \x1b[mThp.Coverage\r
\x1b[0;32m[       OK ] \x1b[mThp.Coverage (12 ms)\r
[ RUN      ] Thp.Collapse
/src/test/allocator_test.cpp:40: Skipped
no MADV_COLLAPSE before Linux 6.1

[  SKIPPED ] Thp.Collapse (0 ms)
[ RUN      ] Thp.Size
[   12.345678] kernel: a message in between
/src/test/allocator_test.cpp:50: Failure
Expected equality of these values:
  thp_page_bytes()
[  FAILED  ] Thp.Size (3 ms)
[==========] 3 tests from 1 test suite ran. (15 ms total)
[  PASSED  ] 1 test.
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] Thp.Collapse
[  FAILED  ] 1 test, listed below:
[  FAILED  ] Thp.Size
@@lab end allocator_test rc=1 seconds=2
"""


class Parse(unittest.TestCase):
    def test_counts_tests_with_reasons(self):
        g = lab_results.parse(FACTS + GTEST + "@@lab done\n@@lab host seconds=95 guest=arm16\n")
        self.assertEqual(g.name, "arm16")
        self.assertEqual(g.passed, 1)
        self.assertEqual(g.skipped, [("Thp.Collapse", "no MADV_COLLAPSE before Linux 6.1")])
        self.assertEqual(len(g.failed), 1)
        self.assertEqual(g.failed[0][0], "Thp.Size")
        self.assertIn("Expected equality", g.failed[0][1])
        self.assertNotIn("kernel: a message", g.failed[0][1])
        self.assertEqual(lab_results.row(g), [
            "arm16", "6.12.117+deb13-arm64-16k", "aarch64", "16K", "32M", "1G,2M,32M", "1",
            "madvise (mTHP 64K:always)", "1", "1", "1", "95s"])

    def test_other_executables_pass_by_status(self):
        g = lab_results.parse("@@lab begin doctor\nreport\n@@lab end doctor rc=0 seconds=1\n"
                              "@@lab begin doctor2\nbad\n@@lab end doctor2 rc=2 seconds=1\n"
                              "@@lab done\n")
        self.assertEqual(g.passed, 1)
        self.assertEqual(g.failed, [("doctor2", "status 2: bad")])

    def test_a_guest_that_dies_mid_test_fails_that_test(self):
        g = lab_results.parse(FACTS + "@@lab begin t\n[ RUN      ] A.B\nKernel panic\n")
        self.assertEqual(g.failed[0][0], "A.B")
        self.assertIn("the guest stopped", g.failed[0][1])
        self.assertIn("Kernel panic", g.failed[0][1])

    def test_a_timed_out_executable_names_its_test(self):
        g = lab_results.parse("@@lab begin t\n[ RUN      ] A.B\n@@lab end t rc=143 seconds=900\n"
                              "@@lab done\n")
        self.assertEqual(g.failed, [("A.B", "did not finish (status 143: timed out): ")])

    def test_a_guest_stopped_at_its_limit_fails_and_says_so(self):
        g = lab_results.parse(FACTS + "@@lab begin t\n[ RUN      ] A.B\n"
                              "@@lab host seconds=900 guest=x limit=900 stopped=1\n")
        self.assertIn(("(guest)", "ran past its limit of 900 s: stopped"), g.failed)
        self.assertEqual(g.failed[-1][0], "A.B")

    def test_a_setting_the_guest_could_not_apply_fails_it(self):
        g = lab_results.parse("@@lab error THP mode sometimes not accepted\n" + FACTS + GTEST +
                              "@@lab done\n")
        self.assertIn(("(setup)", "THP mode sometimes not accepted"), g.failed)

    def test_a_pool_the_command_line_asked_and_the_boot_reserved_short_fails_it(self):
        # The kernel reserves fewer 1 GiB pages than hugepagesz=1G hugepages=2 asks when memory is
        # short at boot, and says nothing; the facts show it.
        boot = ("@@lab fact hugetlb_cmdline 1048576kB:2\n"
                "@@lab fact hugetlb_boot 1048576kB:1\n")
        g = lab_results.parse(boot + FACTS + GTEST + "@@lab done\n")
        self.assertIn(("(setup)", "the kernel command line asked 2 hugetlb pages of 1G, the kernel "
                                  "reserved 1 at boot"), g.failed)
        # Per node ("hugepages=0:1,1:1" is summed in the guest), and what was asked all there.
        whole = ("@@lab fact hugetlb_cmdline 1048576kB:2 2048kB:64\n"
                 "@@lab fact hugetlb_boot 1048576kB:2 2048kB:64\n")
        g = lab_results.parse(whole + FACTS + GTEST + "@@lab done\n")
        self.assertEqual([f for f in g.failed if f[0] == "(setup)"], [])
        self.assertEqual(lab_results.parse(FACTS + "@@lab done\n").failed, [])

    def test_a_guest_that_never_started_fails(self):
        g = lab_results.parse("qemu-system-x86_64: could not load kernel\n")
        self.assertEqual(g.failed, [("(boot)", "the guest did not reach the end of its plan")])

    def test_exit_status_of_main(self):
        self.assertEqual(lab_results.main([]), 2)


if __name__ == "__main__":
    unittest.main()
