#!/usr/bin/env python3
"""Checks that no include in include/hugepage climbs to a higher floor of include/layers.txt,
and that tools/, bench/ and examples/ include only the library's public headers.

Reads the layer map (floors, bottom first, each listing its headers), then every header under
include/hugepage: a header missing from the map, a map entry with no header, an include of a
header on a higher floor (or of one the map does not know, or by a relative path) are each reported
as `path:line: what`, and the exit status is 1. Then every source under tools/, bench/ and
examples/ (tests under tools/test excepted, as test/ is: they test internals): an include of a
hugepage/detail/ header is reported the same way, unless the map allows it ("allow
tools/x.cpp -> detail/y.hpp"; each allowance used is named on every run). Python 3's standard library only; run by
scripts/lint and by the ctest Lint.Layers (scripts/check_layers_test.py).

Usage: check_layers.py [--root DIR] [--map FILE]   (defaults: the repository, include/layers.txt)
"""

import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]hugepage/([^>"]+)[>"]')
QUOTED = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
FLOOR = re.compile(r"^floor\s+([A-Za-z0-9_-]+)\s*:")
ALLOW = re.compile(r"^allow\s+(\S+)\s*->\s*(\S+)$")
SOURCE_DIRS = ("tools", "bench", "examples")  # what is built over the library, not inside it
SOURCE_SUFFIXES = (".cpp", ".cc", ".hpp", ".h")
EXEMPT = ("tools/test/",)  # tests, like test/, may reach the internals they test


class Layers:
    """The map: each header (relative to include/hugepage) and the index of its floor."""

    def __init__(self):
        self.floors = []  # names, bottom first
        self.floor_of = {}  # header -> index into floors
        self.line_of = {}  # header -> line of the map that lists it
        self.allowed = {}  # (header, included header) -> line of its "allow" entry


def read_map(path, problems, shown=None):
    """Parses the map at `path`; appends a `shown:line: what` to `problems` for each bad line
    (`shown`: the path as messages name it, `path` by default)."""
    layers = Layers()
    shown = shown or path
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        floor = FLOOR.match(line)
        if floor:
            if floor.group(1) in layers.floors:
                problems.append(f"{shown}:{number}: floor {floor.group(1)} opened twice")
            layers.floors.append(floor.group(1))
            continue
        allow = ALLOW.match(line)
        if allow:
            layers.allowed[(allow.group(1), allow.group(2))] = number
            continue
        if not layers.floors:
            problems.append(f"{shown}:{number}: {line} is listed before the first floor")
        elif " " in line or not line.endswith((".hpp", ".h")):
            problems.append(f"{shown}:{number}: not a header name nor a floor: {line}")
        elif line in layers.floor_of:
            problems.append(
                f"{shown}:{number}: {line} listed twice (first on line {layers.line_of[line]})")
        else:
            layers.floor_of[line] = len(layers.floors) - 1
            layers.line_of[line] = number
    return layers


def check(root, map_path):
    """Returns the problems found in root/include/hugepage against the map: an empty list when
    every header is on a floor and every include stays on its floor or goes down."""
    problems = []
    try:
        map_shown = map_path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:  # a map outside the repository: named as given
        map_shown = map_path
    layers = read_map(map_path, problems, map_shown)
    base = root / "include" / "hugepage"
    headers = sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in (".hpp", ".h"))
    present = {p.relative_to(base).as_posix() for p in headers}
    for missing in sorted(set(layers.floor_of) - present):
        problems.append(f"{map_shown}:{layers.line_of[missing]}: {missing} is not in "
                        f"include/hugepage")
    used = set()  # the "allow" entries an include needed
    for path in headers:
        name = path.relative_to(base).as_posix()
        shown = path.relative_to(root).as_posix()
        if name not in layers.floor_of:
            problems.append(f"{shown}:1: not in the layer map ({map_path.name}): list it under "
                            f"its floor")
            continue
        own = layers.floor_of[name]
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = INCLUDE.match(text)
            if not match:
                quoted = QUOTED.match(text)
                if quoted:  # a relative path would escape the map: "detail/x.hpp", "../x.hpp"
                    problems.append(f"{shown}:{number}: includes \"{quoted.group(1)}\" by a "
                                    f"relative path: name it from include/ (\"hugepage/...\")")
                continue
            target = match.group(1)
            if target not in layers.floor_of:
                problems.append(f"{shown}:{number}: includes hugepage/{target}, which is not in "
                                f"the layer map ({map_path.name})")
            elif layers.floor_of[target] > own and (name, target) in layers.allowed:
                used.add((name, target))
                print(f"{shown}:{number}: known exception, allowed by {map_path.name}:"
                      f"{layers.allowed[(name, target)]}: includes hugepage/{target}")
            elif layers.floor_of[target] > own:
                problems.append(
                    f"{shown}:{number}: includes hugepage/{target} (floor "
                    f"{layers.floors[layers.floor_of[target]]}) from floor "
                    f"{layers.floors[own]}: an include climbs")
    check_sources(root, layers, map_path.name, used, problems)
    for (name, target), number in sorted(layers.allowed.items(), key=lambda item: item[1]):
        if (name, target) in used:
            continue
        if name.startswith(tuple(d + "/" for d in SOURCE_DIRS)):
            problems.append(f"{map_shown}:{number}: allow {name} -> {target}: {name} no longer "
                            f"includes hugepage/{target}; remove the line")
        else:
            problems.append(f"{map_shown}:{number}: allow {name} -> {target}: no such include "
                            f"climbs any more; remove the line")
    return problems


def check_sources(root, layers, map_name, used, problems):
    """Appends a `path:line: what` to `problems` for each include of a hugepage/detail/ header in
    a source under SOURCE_DIRS that no "allow <source> -> <header>" entry of the map lets pass;
    adds the entries used to `used` and names each on stdout."""
    for directory in SOURCE_DIRS:
        base = root / directory
        if not base.is_dir():
            continue
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            shown = path.relative_to(root).as_posix()
            if path.suffix not in SOURCE_SUFFIXES or shown.startswith(EXEMPT):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), start=1):
                match = INCLUDE.match(line)
                if not match or not match.group(1).startswith("detail/"):
                    continue
                target = match.group(1)
                if (shown, target) in layers.allowed:
                    used.add((shown, target))
                    print(f"{shown}:{number}: known exception, allowed by {map_name}:"
                          f"{layers.allowed[(shown, target)]}: includes hugepage/{target}")
                else:
                    problems.append(f"{shown}:{number}: includes hugepage/{target}, the "
                                    f"library's internals: {directory}/ uses its public API only")


def main(argv=None):
    here = pathlib.Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, default=here,
                        help="the repository (default: this script's)")
    parser.add_argument("--map", type=pathlib.Path, default=None,
                        help="the layer map (default: ROOT/include/layers.txt)")
    args = parser.parse_args(argv)
    map_path = args.map or args.root / "include" / "layers.txt"
    if not map_path.is_file():
        print(f"error: no layer map at {map_path}", file=sys.stderr)
        return 1
    problems = check(args.root, map_path)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"error: {len(problems)} layer problem(s)", file=sys.stderr)
        return 1
    layers = read_map(map_path, [])
    tools = sum(1 for name, _ in layers.allowed if name.split("/")[0] in SOURCE_DIRS)
    climbs = len(layers.allowed) - tools
    allowed = f" but the {climbs} allowed" if climbs else ""
    tools_allowed = f" but the {tools} allowed" if tools else ""
    print(f"layers: {len(layers.floor_of)} headers on {len(layers.floors)} floors, "
          f"no include climbs{allowed}; tools/, bench/ and examples/ include no detail/ "
          f"header{tools_allowed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
