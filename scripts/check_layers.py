#!/usr/bin/env python3
"""Checks that no include in include/hugepage climbs to a higher floor of include/layers.txt,
and that tools/, bench/ and examples/ include only the library's public headers.

Reads the layer map (floors, bottom first, each listing its headers), then every header under
include/hugepage: a header missing from the map, a map entry with no header, an include of a
header on a higher floor (or of one the map does not know, or by a relative path) are each reported
as `path:line: what`, and the exit status is 1. Then every source under tools/, bench/ and
examples/ (tests under tools/test excepted, as test/ is: they test internals): an include of a
hugepage/detail/ header is reported the same way, unless the map allows it ("allow
tools/x.cpp -> detail/y.hpp"; each allowance used is named on every run), and a name from the
library's detail namespace (`detail::x` in code, not in a comment or a string literal) is reported
with no allowance: what a tool needs has a public home, or a home in the tool. Python 3's standard library only; run by
scripts/lint and by the ctest Lint.Layers (scripts/check_layers_test.py).

A bound ("bound allocator.hpp 5300 lines" in the map): that header's include closure (it and the
library headers it reaches, directly or not) has at most that many lines, or it is reported.

The umbrella: every public header (include/hugepage/*, not detail/) is named in the overview
comment that opens hugepage.hpp (a line `//   name.hpp  what it holds`) and included by it; one
whose overview line says "not included" (an optional header with its own dependency) is exempt
from the include, and the overview names no header that does not exist.

Includes are read from the text with comments blanked and raw string literals emptied (line
numbers kept), so an include inside /* */ or R"(...)" is not one, and `#include /* c */ "x"` is.
Targets are normalised ("hugepage//detail/x.hpp"; in tools/, bench/ and examples/ a quoted path
such as "../../include/hugepage/detail/x.hpp" is resolved from the source's folder). Out of scope,
not read as includes: the digraph `%:include`, an include whose target is a macro
(`#include HEADER`), and a directive split by backslash line continuations.

Usage: check_layers.py [--root DIR] [--map FILE]   (defaults: the repository, include/layers.txt)
"""

import argparse
import pathlib
import posixpath
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]hugepage/([^>"]+)[>"]')
QUOTED = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
RAW_PREFIX = re.compile(r'(?:^|[^A-Za-z0-9_])(?:u8|u|U|L)?R$')
FLOOR = re.compile(r"^floor\s+([A-Za-z0-9_-]+)\s*:")
ALLOW = re.compile(r"^allow\s+(\S+)\s*->\s*(\S+)$")
BOUND = re.compile(r"^bound\s+(\S+)\s+(\d+)\s+lines$")
OVERVIEW_ENTRY = re.compile(r"^//\s+([A-Za-z0-9_]+\.hpp)\s")  # "//   name.hpp  what"
UMBRELLA = "hugepage.hpp"
DETAIL_NAME = re.compile(r"\bdetail::(\w*)")
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:\\.|[^\'\\\n])\'')  # "text", 'c', '\n'
SOURCE_DIRS = ("tools", "bench", "examples")  # what is built over the library, not inside it
SOURCE_SUFFIXES = (".cpp", ".cc", ".hpp", ".h", ".ipp", ".inc")  # floors and the tools rule
EXEMPT = ("tools/test/",)  # tests, like test/, may reach the internals they test


def code_lines(text):
    """The lines of C++ `text` with comments blanked and raw string literals emptied, newlines
    kept (so line numbers stay): what the preprocessor would see of the includes. Ordinary string
    and character literals are kept (an include's "target" is one) but skipped over, so a quote
    or comment marker inside them starts nothing; a digit separator (1'000) is no character
    literal. Line continuations are not joined (out of scope, as the module says)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(" " + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"' and RAW_PREFIX.search(text, max(0, i - 3), i):
            open_paren = text.find("(", i + 1)
            delimiter = text[i + 1:open_paren] if open_paren >= 0 else ""
            close = text.find(")" + delimiter + '"', open_paren + 1) if open_paren >= 0 else -1
            end = n if close < 0 else close + len(delimiter) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
                start = i - 1
                while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_'"):
                    start -= 1
                if text[start].isdigit():  # a digit separator
                    out.append(c)
                    i += 1
                    continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n) if j < n and text[j] == c else j
            out.append(text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out).split("\n")


def normalised(target):
    """An include target with "." and ".." folded and doubled slashes merged."""
    return posixpath.normpath(target) if target else target


class Layers:
    """The map: each header (relative to include/hugepage) and the index of its floor."""

    def __init__(self):
        self.floors = []  # names, bottom first
        self.floor_of = {}  # header -> index into floors
        self.line_of = {}  # header -> line of the map that lists it
        self.allowed = {}  # (header, included header) -> line of its "allow" entry
        self.bounds = {}  # header -> (most lines its include closure may have, line of the entry)


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
        bound = BOUND.match(line)
        if bound:
            layers.bounds[bound.group(1)] = (int(bound.group(2)), number)
            continue
        if not layers.floors:
            problems.append(f"{shown}:{number}: {line} is listed before the first floor")
        elif " " in line or not line.endswith(SOURCE_SUFFIXES):
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
    headers = sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    present = {p.relative_to(base).as_posix() for p in headers}
    for missing in sorted(set(layers.floor_of) - present):
        problems.append(f"{map_shown}:{layers.line_of[missing]}: {missing} is not in "
                        f"include/hugepage")
    used = set()  # the "allow" entries an include needed
    includes = {}  # header -> the headers of include/hugepage it includes
    for path in headers:
        name = path.relative_to(base).as_posix()
        shown = path.relative_to(root).as_posix()
        if name not in layers.floor_of:
            problems.append(f"{shown}:1: not in the layer map ({map_path.name}): list it under "
                            f"its floor")
            continue
        own = layers.floor_of[name]
        for number, text in enumerate(code_lines(path.read_text(encoding="utf-8")), start=1):
            match = INCLUDE.match(text)
            target = normalised("hugepage/" + match.group(1)) if match else ""
            if not target.startswith("hugepage/"):
                quoted = QUOTED.match(text)
                if quoted:  # a relative path would escape the map: "detail/x.hpp", "../x.hpp"
                    problems.append(f"{shown}:{number}: includes \"{quoted.group(1)}\" by a "
                                    f"relative path: name it from include/ (\"hugepage/...\")")
                elif match:  # <hugepage/../x.hpp>
                    problems.append(f"{shown}:{number}: includes hugepage/{match.group(1)}, "
                                    f"which leaves include/hugepage")
                continue
            target = target[len("hugepage/"):]
            includes.setdefault(name, set()).add(target)
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
    check_bounds(base, layers, includes, map_shown, problems)
    check_umbrella(base, root, problems)
    checked = check_sources(root, layers, map_path.name, used, problems)
    for (name, target), number in sorted(layers.allowed.items(), key=lambda item: item[1]):
        if (name, target) in used:
            continue
        if name.startswith(tuple(d + "/" for d in SOURCE_DIRS)):
            problems.append(f"{map_shown}:{number}: allow {name} -> {target}: {name} no longer "
                            f"includes hugepage/{target}; remove the line")
        else:
            problems.append(f"{map_shown}:{number}: allow {name} -> {target}: no such include "
                            f"climbs any more; remove the line")
    return problems, checked


def closure_of(header, includes):
    """`header` and every header of include/hugepage it includes, directly or not."""
    seen, pending = set(), [header]
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(includes.get(name, ()))
    return seen


def check_bounds(base, layers, includes, map_shown, problems):
    """Appends a problem for each "bound <header> <N> lines" of the map whose header's include
    closure (the header and the library headers it reaches) has more than N lines, or whose
    header does not exist: what every user of that header compiles stays as small as stated."""
    for header, (most, number) in sorted(layers.bounds.items()):
        if not (base / header).is_file():
            problems.append(f"{map_shown}:{number}: bound {header}: no such header")
            continue
        closure = closure_of(header, includes)
        lines = sum(len((base / name).read_text(encoding="utf-8").splitlines())
                    for name in closure if (base / name).is_file())
        if lines > most:
            problems.append(f"{map_shown}:{number}: bound {header}: its include closure has "
                            f"{lines} lines in {len(closure)} headers, more than the {most} "
                            f"stated: move what the path does not need out of it, or raise the "
                            f"bound saying why")


def check_umbrella(base, root, problems):
    """Appends a `path:line: what` to `problems` for each public header of `base` that the
    umbrella's overview comment does not name or the umbrella does not include (unless its
    overview line says "not included"), and for each overview entry naming no header."""
    umbrella = base / UMBRELLA
    if not umbrella.is_file():
        return  # the map check names a missing umbrella
    shown = umbrella.relative_to(root).as_posix()
    text = umbrella.read_text(encoding="utf-8")
    named = {}  # header -> (line of its overview entry, the entry's text)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("//"):
            break  # the overview is the comment the file opens with
        entry = OVERVIEW_ENTRY.match(line)
        if entry:
            named.setdefault(entry.group(1), (number, line))
    included = set()
    for line in code_lines(text):
        match = INCLUDE.match(line)
        if match:
            included.add(normalised(match.group(1)))
    public = sorted(p.name for p in base.iterdir()
                    if p.is_file() and p.suffix in SOURCE_SUFFIXES and p.name != UMBRELLA)
    for header in public:
        if header not in named:
            problems.append(f"{shown}:1: {header} is not named in the overview comment: add a "
                            f"line `//   {header}  what it holds`")
        number, entry = named.get(header, (1, ""))
        if header not in included and "not included" not in entry:
            problems.append(f"{shown}:{number}: {header} is not included by {UMBRELLA} (an "
                            f"optional header says \"not included\" on its overview line)")
    for header, (number, _) in sorted(named.items()):
        if header not in public:
            problems.append(f"{shown}:{number}: the overview names {header}, which is not a "
                            f"public header of include/hugepage")


def check_sources(root, layers, map_name, used, problems):
    """Appends a `path:line: what` to `problems` for each name from namespace detail, and each
    include of a hugepage/detail/ header that no "allow <source> -> <header>" entry of the map
    lets pass, in a source under SOURCE_DIRS;
    adds the entries used to `used` and names each on stdout. Returns the directories that exist
    (and so were checked)."""
    library = (root / "include" / "hugepage").resolve()
    checked = []
    for directory in SOURCE_DIRS:
        base = root / directory
        if not base.is_dir():
            continue
        checked.append(directory)
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            shown = path.relative_to(root).as_posix()
            if path.suffix not in SOURCE_SUFFIXES or shown.startswith(EXEMPT):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(code_lines(text), start=1):
                for name in DETAIL_NAME.finditer(STRING.sub('""', line)):
                    problems.append(f"{shown}:{number}: names detail::{name.group(1)}, the "
                                    f"library's internals: {directory}/ uses its public API "
                                    f"only (give it a public home or one in the tool)")
                target = library_target(line, path, library)
                if target is None or not target.startswith("detail/"):
                    continue
                if (shown, target) in layers.allowed:
                    used.add((shown, target))
                    print(f"{shown}:{number}: known exception, allowed by {map_name}:"
                          f"{layers.allowed[(shown, target)]}: includes hugepage/{target}")
                else:
                    problems.append(f"{shown}:{number}: includes hugepage/{target}, the "
                                    f"library's internals: {directory}/ uses its public API only")
    return checked


def library_target(line, source, library):
    """The header of include/hugepage that an include `line` of `source` names (relative to
    include/hugepage, normalised), or None: "hugepage/x" as written, or a quoted path that
    resolves from the source's folder into `library` ("../../include/hugepage/detail/x.hpp")."""
    match = ANY_INCLUDE.match(line)
    if not match:
        return None
    target = normalised(match.group(2))
    if target.startswith("hugepage/"):
        return target[len("hugepage/"):]
    if match.group(1) == '"':
        resolved = pathlib.Path(posixpath.normpath((source.parent / match.group(2)).as_posix()))
        try:
            return resolved.resolve().relative_to(library).as_posix()
        except ValueError:
            return None
    return None


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
    problems, checked = check(args.root, map_path)
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
    dirs = [f"{d}/" for d in checked]
    sources = (", ".join(dirs[:-1]) + " and " + dirs[-1]) if len(dirs) > 1 else "".join(dirs)
    said = (f"{sources} include{'s' if len(dirs) == 1 else ''} no detail/ header{tools_allowed}"
            if dirs else "no sources over the library checked")
    absent = "".join(f"; no {d}/ directory" for d in SOURCE_DIRS if d not in checked)
    print(f"layers: {len(layers.floor_of)} headers on {len(layers.floors)} floors, "
          f"no include climbs{allowed}; {said}{absent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
