"""The machine header asks the binary for the kernel, THP and pools (--machine-facts --json)."""

import json
import os
import stat
import tempfile
import unittest
from pathlib import Path
from types import SimpleNamespace

from runner.machine import machine_facts, machine_lines

FIXTURE = Path(__file__).with_name("machine-facts.json")


def fake_bench(directory, body):
    """An executable that stands in for hugepage_bench: runs the shell `body`."""
    path = Path(directory) / "hugepage_bench"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


class MachineFacts(unittest.TestCase):
    def test_the_binary_is_asked_with_its_flags(self):
        with tempfile.TemporaryDirectory() as d:
            bench = fake_bench(d, f'[ "$1 $2" = "--machine-facts --json" ] || exit 2\n'
                                  f'cat "{FIXTURE}"')
            self.assertEqual(machine_facts(bench), json.loads(FIXTURE.read_text()))

    def test_a_failing_binary_is_a_problem_in_words(self):
        with tempfile.TemporaryDirectory() as d:
            bench = fake_bench(d, 'echo "unknown flag" >&2; exit 2')
            facts = machine_facts(bench)
            self.assertIn("problem", facts)
            self.assertIn("exit status 2: unknown flag", facts["problem"])
            bench = fake_bench(d, "echo not json")
            self.assertIn("problem", machine_facts(bench))

    def test_header_shows_the_effective_mode_with_the_per_size_switch(self):
        # enabled=madvise but hugepages-2048kB/enabled=never: no 2 MiB THP at all.
        args = SimpleNamespace(machine_facts=json.loads(FIXTURE.read_text()), headroom=None)
        lines = machine_lines({"cpu_model": "x"}, args)
        self.assertIn("  kernel: 6.18.0-test  (hugepage_bench --machine-facts)", lines)
        self.assertIn("  thp: never for 2 MiB pages (enabled=madvise, "
                      "hugepages-2048kB/enabled=never) defrag=madvise  "
                      "(hugepage_bench --machine-facts)", lines)
        self.assertIn("  hugetlb pools: 2 MiB: 512 total, 500 free; 1 GiB: 0 total, ? free  "
                      "(hugepage_bench --machine-facts)", lines)

    def test_the_binary_is_not_asked_when_the_context_says_it_all(self):
        args = SimpleNamespace(bench="/nonexistent/hugepage_bench", headroom=None)
        context = {"cpu_model": "x", "kernel": "6.18", "thp_enabled": "madvise",
                   "hugetlb_pools": "none"}
        lines = machine_lines(context, args)
        self.assertFalse([line for line in lines if "machine-facts" in line], lines)

    def test_an_unreadable_binary_is_said_once(self):
        args = SimpleNamespace(bench="/nonexistent/hugepage_bench", headroom=None)
        lines = machine_lines({"cpu_model": "x"}, args)
        said = [line for line in lines if "machine facts: not read" in line]
        self.assertEqual(len(said), 1, lines)


class MachineFactsCpu(unittest.TestCase):
    def test_the_cpu_model_comes_from_the_binary(self):
        args = SimpleNamespace(machine_facts=json.loads(FIXTURE.read_text()), headroom=None)
        lines = machine_lines({}, args)
        self.assertIn("  cpu_model: Test CPU @ 2.20GHz  (hugepage_bench --machine-facts)", lines)
        self.assertFalse([line for line in lines if "read by run.py" in line], lines)

    def test_without_a_model_the_runner_names_the_processor_itself(self):
        args = SimpleNamespace(machine_facts={"problem": "no binary"}, headroom=None)
        lines = machine_lines({}, args)
        self.assertEqual(len([line for line in lines
                              if line.startswith("  cpu_model: ") and "(read by run.py)" in line]),
                         1, lines)


if __name__ == "__main__":
    unittest.main()
