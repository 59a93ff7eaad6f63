#!/usr/bin/env python3
"""Tests of scripts/check_layers.py: the repository passes, and each planted fault in a temporary
copy of include/ (and of the sources of tools/, bench/ and examples/) fails, naming the file and
line. Run by the ctest Lint.Layers:
`python3 -m unittest scripts/check_layers_test.py` from the repository root."""

import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = pathlib.Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
CHECKER = SCRIPTS / "check_layers.py"


def run_checker(root):
    """Runs the checker as scripts/lint does: (exit status, stderr)."""
    done = subprocess.run([sys.executable, str(CHECKER), "--root", str(root)],
                          capture_output=True, text=True, check=False)
    return done.returncode, done.stderr


def append_include(path, target):
    """Adds `#include "hugepage/<target>"` after the last include of `path`; returns its line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    last = max(i for i, line in enumerate(lines) if line.startswith("#include"))
    lines.insert(last + 1, f'#include "hugepage/{target}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return last + 2


def not_a_source(directory, names):
    """shutil.copytree's ignore: the files that are not C++ sources or headers."""
    folder = pathlib.Path(directory)
    return [n for n in names
            if not (folder / n).is_dir()
            and not n.endswith((".cpp", ".cc", ".hpp", ".h", ".ipp", ".inc"))]


def append_text(path, text):
    """Adds `text` (whole lines) at the end of `path`; returns the number of its first line."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    path.write_text(old + text, encoding="utf-8")
    return old.count("\n") + 1


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.scratch.name)
        shutil.copytree(ROOT / "include", self.root / "include")
        for directory in ("tools", "bench", "examples"):  # their sources, no data or build
            shutil.copytree(ROOT / directory, self.root / directory, ignore=not_a_source)
        self.headers = self.root / "include" / "hugepage"
        self.map = self.root / "include" / "layers.txt"

    def tearDown(self):
        self.scratch.cleanup()

    def drop_bounds(self):
        """Removes the map's "bound" lines: text a test plants in a header lengthens a bounded
        closure, and a test about something else must not fail on the margin left under a bound."""
        lines = self.map.read_text(encoding="utf-8").splitlines()
        self.map.write_text("".join(line + "\n" for line in lines
                                    if not line.startswith("bound ")), encoding="utf-8")

    def map_line(self, entry):
        """The line of the map that lists `entry` (a header, or the start of a "bound" line)."""
        lines = self.map.read_text(encoding="utf-8").splitlines()
        return 1 + next(i for i, line in enumerate(lines)
                        if line.split("#")[0].strip() == entry
                        or line.startswith(entry + " "))

    def assert_fails_with(self, *expected):
        status, errors = run_checker(self.root)
        self.assertEqual(status, 1, errors)
        for text in expected:
            self.assertIn(text, errors)

    def test_the_repository_has_no_climbing_include(self):
        status, errors = run_checker(ROOT)
        self.assertEqual(status, 0, errors)

    def test_the_untouched_copy_passes(self):
        status, errors = run_checker(self.root)
        self.assertEqual(status, 0, errors)

    def test_a_public_header_including_a_higher_floor_fails(self):
        line = append_include(self.headers / "os.hpp", "strategy.hpp")
        self.assert_fails_with(
            f"include/hugepage/os.hpp:{line}: includes hugepage/strategy.hpp (floor strategy) "
            "from floor kernel: an include climbs")

    def test_a_detail_header_including_a_higher_floor_fails(self):
        line = append_include(self.headers / "detail" / "pagemap.hpp", "backing.hpp")
        self.assert_fails_with(
            f"include/hugepage/detail/pagemap.hpp:{line}: includes hugepage/backing.hpp (floor "
            "introspection) from floor kernel: an include climbs")

    def test_an_include_in_angle_brackets_is_checked_too(self):
        path = self.headers / "strategy.hpp"
        lines = path.read_text(encoding="utf-8").splitlines()
        lines.insert(1, "#include <hugepage/arena.hpp>")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.assert_fails_with("include/hugepage/strategy.hpp:2: includes hugepage/arena.hpp "
                               "(floor adapters) from floor strategy: an include climbs")

    def test_an_include_on_the_same_floor_or_below_passes(self):
        append_include(self.headers / "collapse.hpp", "label.hpp")  # same floor: upkeep
        append_include(self.headers / "collapse.hpp", "errors.hpp")  # down to kernel
        status, errors = run_checker(self.root)
        self.assertEqual(status, 0, errors)

    def test_an_include_past_a_headers_bound_fails(self):
        # allocator.hpp's closure is bounded in the map; one more header below it (cgroup.hpp
        # reaches none of backing.hpp's own) pushes it past.
        line = self.map_line("bound allocator.hpp")
        append_include(self.headers / "page_size.hpp", "backing.hpp")
        self.assert_fails_with(f"include/layers.txt:{line}: bound allocator.hpp: its include "
                               "closure has ", "more than the ")

    def test_a_bound_on_a_missing_header_fails(self):
        line = append_text(self.map, "bound no_such.hpp 10 lines\n")
        self.assert_fails_with(f"include/layers.txt:{line}: bound no_such.hpp: no such header")

    def test_a_header_missing_from_the_map_fails(self):
        (self.headers / "detail" / "planted.hpp").write_text("#pragma once\n", encoding="utf-8")
        self.assert_fails_with("include/hugepage/detail/planted.hpp:1: not in the layer map "
                               "(layers.txt)")

    def test_an_include_of_an_unknown_header_fails(self):
        line = append_include(self.headers / "os.hpp", "no_such.hpp")
        self.assert_fails_with(f"include/hugepage/os.hpp:{line}: includes hugepage/no_such.hpp, "
                               "which is not in the layer map")

    def test_an_include_by_a_relative_path_fails(self):
        path = self.headers / "detail" / "proc_file.hpp"
        lines = path.read_text(encoding="utf-8").splitlines()
        lines.insert(1, '#include "../strategy.hpp"')
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.assert_fails_with('include/hugepage/detail/proc_file.hpp:2: includes '
                               '"../strategy.hpp" by a relative path')

    def test_a_map_entry_without_its_header_fails(self):
        (self.headers / "smaps.hpp").unlink()
        line = self.map_line("smaps.hpp")
        self.assert_fails_with(f"include/layers.txt:{line}: smaps.hpp is not in include/hugepage")

    def test_a_header_listed_on_two_floors_fails(self):
        with self.map.open("a", encoding="utf-8") as out:
            out.write("os.hpp\n")
        self.assert_fails_with(f"os.hpp listed twice (first on line {self.map_line('os.hpp')})")

    def test_an_allowed_climb_passes_and_is_named(self):
        self.drop_bounds()
        line = append_include(self.headers / "os.hpp", "strategy.hpp")
        with self.map.open("a", encoding="utf-8") as out:
            out.write("allow os.hpp -> strategy.hpp  # planted\n")
        done = subprocess.run([sys.executable, str(CHECKER), "--root", str(self.root)],
                              capture_output=True, text=True, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(f"include/hugepage/os.hpp:{line}: known exception", done.stdout)

    def test_an_allowance_for_an_include_that_no_longer_climbs_fails(self):
        with self.map.open("a", encoding="utf-8") as out:
            out.write("allow os.hpp -> strategy.hpp\n")
        self.assert_fails_with("allow os.hpp -> strategy.hpp: no such include climbs any more")

    def test_a_tool_including_a_detail_header_fails(self):
        line = append_include(self.root / "tools" / "doctor" / "main.cpp", "detail/pagemap.hpp")
        self.assert_fails_with(
            f"tools/doctor/main.cpp:{line}: includes hugepage/detail/pagemap.hpp, the library's "
            "internals: tools/ uses its public API only")

    def test_a_benchmark_or_example_including_a_detail_header_fails(self):
        bench = append_include(self.root / "bench" / "main.cpp", "detail/proc_file.hpp")
        example = next(p for p in sorted((self.root / "examples").rglob("*.cpp"))
                       if "#include" in p.read_text(encoding="utf-8"))
        shown = example.relative_to(self.root).as_posix()
        line = append_include(example, "detail/errno_text.hpp")
        self.assert_fails_with(
            f"bench/main.cpp:{bench}: includes hugepage/detail/proc_file.hpp",
            f"{shown}:{line}: includes hugepage/detail/errno_text.hpp, the library's internals: "
            "examples/ uses its public API only")

    def test_a_tool_test_may_include_a_detail_header(self):
        append_include(self.root / "tools" / "test" / "doctor_parse_test.cpp",
                       "detail/pagemap.hpp")
        status, errors = run_checker(self.root)
        self.assertEqual(status, 0, errors)

    def test_an_allowed_tool_include_passes_and_is_named(self):
        line = append_include(self.root / "tools" / "doctor" / "main.cpp", "detail/pagemap.hpp")
        with self.map.open("a", encoding="utf-8") as out:
            out.write("allow tools/doctor/main.cpp -> detail/pagemap.hpp  # planted\n")
        done = subprocess.run([sys.executable, str(CHECKER), "--root", str(self.root)],
                              capture_output=True, text=True, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(f"tools/doctor/main.cpp:{line}: known exception, allowed by layers.txt:",
                      done.stdout)

    def test_a_tool_allowance_no_longer_needed_fails(self):
        with self.map.open("a", encoding="utf-8") as out:
            out.write("allow tools/doctor/main.cpp -> detail/pagemap.hpp\n")
        self.assert_fails_with("allow tools/doctor/main.cpp -> detail/pagemap.hpp: "
                               "tools/doctor/main.cpp no longer includes "
                               "hugepage/detail/pagemap.hpp; remove the line")

    def test_an_include_in_a_block_comment_or_a_raw_string_is_none(self):
        self.drop_bounds()
        append_text(self.root / "tools" / "doctor" / "main.cpp",
                    '/*\n#include "hugepage/detail/pagemap.hpp"\n*/\n'
                    'const char* quoted = R"x(\n#include "hugepage/detail/pagemap.hpp"\n)x";\n'
                    "const int big = 1'000; const char q = '\"';\n")
        append_text(self.headers / "os.hpp", '/* a note:\n#include "hugepage/strategy.hpp"\n*/\n'
                    '// #include "hugepage/strategy.hpp"\n')
        status, errors = run_checker(self.root)
        self.assertEqual(status, 0, errors)

    def test_an_include_with_a_comment_inside_is_one(self):
        header = append_text(self.headers / "os.hpp",
                             '#include /* c */ "hugepage/collapse.hpp"\n')
        tool = append_text(self.root / "tools" / "doctor" / "main.cpp",
                           '#  include /* c */ <hugepage/detail/pagemap.hpp>  // x\n')
        self.assert_fails_with(
            f"include/hugepage/os.hpp:{header}: includes hugepage/collapse.hpp (floor upkeep) "
            "from floor kernel: an include climbs",
            f"tools/doctor/main.cpp:{tool}: includes hugepage/detail/pagemap.hpp, the library's "
            "internals")

    def test_include_paths_are_normalised(self):
        main = self.root / "tools" / "doctor" / "main.cpp"
        doubled = append_text(main, '#include "hugepage//detail/pagemap.hpp"\n')
        climbed = append_text(main, '#include "../../include/hugepage/./detail/proc_file.hpp"\n')
        header = append_text(self.headers / "os.hpp", '#include "hugepage//strategy.hpp"\n')
        self.assert_fails_with(
            f"tools/doctor/main.cpp:{doubled}: includes hugepage/detail/pagemap.hpp, the",
            f"tools/doctor/main.cpp:{climbed}: includes hugepage/detail/proc_file.hpp, the",
            f"include/hugepage/os.hpp:{header}: includes hugepage/strategy.hpp (floor strategy)")

    def test_every_source_suffix_is_checked(self):
        (self.headers / "planted.ipp").write_text("#pragma once\n", encoding="utf-8")
        (self.root / "tools" / "doctor" / "planted.inc").write_text(
            '#include "hugepage/detail/pagemap.hpp"\n', encoding="utf-8")
        (self.root / "bench" / "planted.ipp").write_text(
            '#include "hugepage/detail/proc_file.hpp"\n', encoding="utf-8")
        self.assert_fails_with(
            "include/hugepage/planted.ipp:1: not in the layer map (layers.txt)",
            "tools/doctor/planted.inc:1: includes hugepage/detail/pagemap.hpp, the library's "
            "internals: tools/ uses its public API only",
            "bench/planted.ipp:1: includes hugepage/detail/proc_file.hpp")

    def test_a_tool_naming_a_detail_entity_fails(self):
        tool = append_text(self.root / "tools" / "doctor" / "main.cpp",
                           "static const auto planted = hugepage::detail::split(\"a,b\", ',');\n")
        bench = append_text(self.root / "bench" / "main.cpp",
                            "namespace { using hugepage::detail::unique_fd; }\n")
        self.assert_fails_with(
            f"tools/doctor/main.cpp:{tool}: names detail::split, the library's internals: tools/ "
            "uses its public API only",
            f"bench/main.cpp:{bench}: names detail::unique_fd, the library's internals: bench/")

    def test_a_detail_name_in_a_comment_a_string_or_a_tool_test_passes(self):
        append_text(self.root / "tools" / "doctor" / "main.cpp",
                    '// hugepage::detail::split is internal\n/* detail::x */\n'
                    'const char* text = "detail::split";\nconst char* raw = R"(detail::y)";\n'
                    "const int big = 1'000'000;\n")
        append_text(self.root / "tools" / "test" / "doctor_parse_test.cpp",
                    "static const auto planted = hugepage::detail::split(\"a\", ',');\n")
        status, errors = run_checker(self.root)
        self.assertEqual(status, 0, errors)

    def test_a_public_header_missing_from_the_umbrella_fails(self):
        (self.headers / "planted.hpp").write_text("#pragma once\n", encoding="utf-8")
        with self.map.open("a", encoding="utf-8") as out:  # on a floor, so only the umbrella fails
            out.write("floor planted: a planted floor\nplanted.hpp\n")
        self.assert_fails_with(
            "include/hugepage/hugepage.hpp:1: planted.hpp is not named in the overview comment",
            "include/hugepage/hugepage.hpp:1: planted.hpp is not included by hugepage.hpp")

    def test_a_header_named_in_the_overview_but_not_included_fails(self):
        umbrella = self.headers / "hugepage.hpp"
        text = umbrella.read_text(encoding="utf-8")
        umbrella.write_text(text.replace('#include "hugepage/smaps.hpp"\n', ""), encoding="utf-8")
        line = 1 + next(i for i, row in enumerate(text.splitlines())
                        if row.startswith("//   smaps.hpp "))
        self.assert_fails_with(f"include/hugepage/hugepage.hpp:{line}: smaps.hpp is not included "
                               "by hugepage.hpp")

    def test_a_header_included_but_not_in_the_overview_fails(self):
        umbrella = self.headers / "hugepage.hpp"
        text = umbrella.read_text(encoding="utf-8")
        entry = next(row for row in text.splitlines() if row.startswith("//   smaps.hpp "))
        umbrella.write_text(text.replace(entry + "\n", ""), encoding="utf-8")
        status, errors = run_checker(self.root)
        self.assertEqual(status, 1, errors)
        self.assertIn("include/hugepage/hugepage.hpp:1: smaps.hpp is not named in the overview "
                      "comment", errors)
        self.assertNotIn("smaps.hpp is not included", errors)

    def test_the_overview_naming_no_header_fails(self):
        umbrella = self.headers / "hugepage.hpp"
        line = 1 + umbrella.read_text(encoding="utf-8").splitlines().index("//")
        text = umbrella.read_text(encoding="utf-8").replace(
            "//\n", "//\n//   gone.hpp       a header that was removed\n", 1)
        umbrella.write_text(text, encoding="utf-8")
        self.assert_fails_with(f"include/hugepage/hugepage.hpp:{line + 1}: the overview names "
                               "gone.hpp, which is not a public header of include/hugepage")

    def test_an_optional_header_passes_only_when_marked_not_included(self):
        umbrella = self.headers / "hugepage.hpp"
        text = umbrella.read_text(encoding="utf-8")
        entry = next(row for row in text.splitlines() if row.startswith("//   perf_events_pfm"))
        self.assertIn("not included", entry)
        umbrella.write_text(text.replace(entry, "//   perf_events_pfm.hpp  optional"),
                            encoding="utf-8")
        self.assert_fails_with("perf_events_pfm.hpp is not included by hugepage.hpp")

    def test_absent_source_directories_are_named_not_claimed(self):
        for directory in ("tools", "bench", "examples"):
            shutil.rmtree(self.root / directory)
        done = subprocess.run([sys.executable, str(CHECKER), "--root", str(self.root)],
                              capture_output=True, text=True, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("no sources over the library checked; no tools/ directory; no bench/ "
                      "directory; no examples/ directory", done.stdout)
        self.assertNotIn("include no detail/ header", done.stdout)
        shutil.copytree(ROOT / "bench", self.root / "bench", ignore=not_a_source)
        done = subprocess.run([sys.executable, str(CHECKER), "--root", str(self.root)],
                              capture_output=True, text=True, check=False)
        self.assertIn("bench/ includes no detail/ header; no tools/ directory; no examples/ "
                      "directory", done.stdout)


if __name__ == "__main__":
    unittest.main()
