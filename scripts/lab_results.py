#!/usr/bin/env python3
"""Reads the console logs of scripts/lab's guests and prints one table: the guest's facts and
its tests passed, failed and skipped, then each failure and each skip with its reason.

    python3 scripts/lab_results.py out/lab/GUEST.log...      (exit status 1 when a guest failed)
    python3 scripts/lab_results.py --markdown LOG...          the same as a Markdown table

A guest's log holds lines "@@lab fact KEY VALUE", "@@lab error WHAT" (a setting it could not
apply: a failure), "@@lab begin NAME", the executable's output, "@@lab end NAME rc=N seconds=S",
"@@lab done", and the host's "@@lab host seconds=S guest=NAME".
Output of a Google Test executable is counted per test; any other executable passes when it
exits with 0. A block without its end (the guest died, or ran past its time) is a failure."""

import re
import sys
from dataclasses import dataclass, field

RUN = re.compile(r"^\[ RUN      \] (\S+)")
OK = re.compile(r"^\[       OK \] (\S+) \(\d+ ms\)")
FAILED = re.compile(r"^\[  FAILED  \] (\S+)(?:, where .*)? \(\d+ ms\)")
SKIPPED = re.compile(r"^\[  SKIPPED \] (\S+) \(\d+ ms\)")
# A kernel message interleaved with the console output.
KERNEL = re.compile(r"^\[\s*\d+\.\d+\] ")
# Terminal colours (gtest colours its output on a terminal).
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Guest:
    """One guest's facts and results."""
    name: str = ""
    facts: dict = field(default_factory=dict)
    passed: int = 0
    failed: list = field(default_factory=list)    # (test, why)
    skipped: list = field(default_factory=list)   # (test, reason)
    seconds: int = 0
    done: bool = False


def _first_lines(lines, limit=3):
    text = [line.strip() for line in lines if line.strip()]
    return " / ".join(text[:limit])[:300]


def _gtest_block(guest, block, name, rc):
    """Counts one Google Test executable's tests from its output lines."""
    current, body = None, []
    failed_before = len(guest.failed)
    for line in block:
        if m := RUN.match(line):
            current, body = m.group(1), []
        elif m := OK.match(line):
            guest.passed += 1
            current = None
        elif m := SKIPPED.match(line):
            # gtest prints "file:line: Skipped" and then the reason.
            reason = [l for l in body if not l.rstrip().endswith(": Skipped")]
            guest.skipped.append((m.group(1), _first_lines(reason) or "(no reason given)"))
            current = None
        elif m := FAILED.match(line):
            guest.failed.append((m.group(1), _first_lines(body, 4) or "(no message)"))
            current = None
        elif current is not None:
            body.append(line)
    if current is not None:
        guest.failed.append((current, f"did not finish ({_rc_text(rc)}): {_first_lines(body[-6:], 6)}"))
    elif rc != 0 and len(guest.failed) == failed_before:
        # Every test passed, yet the executable failed (a crash at exit, a leak checker).
        guest.failed.append((name, f"exited with {_rc_text(rc)}: {_first_lines(block[-4:], 4)}"))


def _rc_text(rc):
    if rc is None:
        return "no exit status: the guest stopped"
    if rc in (124, 143):
        return f"status {rc}: timed out"
    if rc > 128:
        return f"signal {rc - 128}"
    return f"status {rc}"


def parse(text, fallback_name=""):
    """One guest's log text -> Guest."""
    guest = Guest(name=fallback_name)
    block, name = None, None
    for raw in text.splitlines():
        line = COLOUR.sub("", raw.rstrip("\r"))
        if line.startswith("@@lab "):
            words = line.split()
            kind = words[1] if len(words) > 1 else ""
            if kind == "fact" and len(words) >= 3:
                guest.facts[words[2]] = " ".join(words[3:])
            elif kind == "begin":
                block, name = [], words[2]
            elif kind == "end" and block is not None:
                fields = dict(w.split("=", 1) for w in words[3:] if "=" in w)
                _finish(guest, name, block, int(fields.get("rc", "1")))
                block, name = None, None
            elif kind == "done":
                guest.done = True
            elif kind == "error":
                # A setting of the guest's line (THP mode, mTHP, pools) that the guest could not
                # apply: its tests ran on another machine than the one declared.
                guest.failed.append(("(setup)", " ".join(words[2:]) or "(no message)"))
            elif kind == "host":
                fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
                guest.seconds = int(fields.get("seconds", "0"))
                guest.name = fields.get("guest", guest.name)
                if fields.get("stopped") == "1":
                    guest.failed.append(("(guest)", f"ran past its limit of {fields.get('limit', '?')} s: stopped"))
        elif block is not None and not KERNEL.match(line):
            block.append(line)
    if block is not None:
        _finish(guest, name, block, None)
    for size, asked, got in _short_boot_pools(guest.facts):
        guest.failed.append(("(setup)", f"the kernel command line asked {asked} hugetlb pages of "
                                        f"{_size(size)}, the kernel reserved {got} at boot"))
    if not guest.done and not guest.failed:
        guest.failed.append(("(boot)", "the guest did not reach the end of its plan"))
    return guest


def _pages_by_size(text):
    """'1048576kB:2 2048kB:0' -> {'1048576kB': 2, '2048kB': 0}; a malformed pair counts 0."""
    out = {}
    for pair in text.split():
        size, _, pages = pair.partition(":")
        out[size] = out.get(size, 0) + (int(pages) if pages.isdigit() else 0)
    return out


def _short_boot_pools(facts):
    """(size, asked, reserved) of each pool the kernel command line asked (fact hugetlb_cmdline)
    that the kernel reserved short at boot (fact hugetlb_boot): it says nothing itself, and the
    guest's tests would run on another machine than the one its line declares."""
    asked = _pages_by_size(facts.get("hugetlb_cmdline", ""))
    booted = _pages_by_size(facts.get("hugetlb_boot", ""))
    return [(size, pages, booted.get(size, 0)) for size, pages in asked.items()
            if booted.get(size, 0) < pages]


def _finish(guest, name, block, rc):
    if any(RUN.match(line) for line in block):
        _gtest_block(guest, block, name, rc)
    elif rc == 0:
        guest.passed += 1
    else:
        guest.failed.append((name, f"{_rc_text(rc)}: {_first_lines(block[-4:], 4)}"))


def _size(kb_text):
    """'2048kB' -> '2M'."""
    kb = int(kb_text.rstrip("kB"))
    for unit, scale in (("G", 1 << 20), ("M", 1 << 10)):
        if kb >= scale and kb % scale == 0:
            return f"{kb // scale}{unit}"
    return f"{kb}K"


def _bytes(text):
    try:
        return _size(f"{int(text) // 1024}kB")
    except ValueError:
        return text or "?"


def row(guest):
    """The table's cells for one guest."""
    f = guest.facts
    hugetlb = ",".join(_size(pair.split(":")[0]) for pair in f.get("hugetlb", "").split()) or "-"
    thp = f.get("thp", "?")
    if f.get("mthp"):
        thp += " (mTHP " + ",".join(
            f"{_size(p.split(':')[0].replace('hugepages-', ''))}:{p.split(':')[1]}"
            for p in f["mthp"].split()) + ")"
    return [guest.name, f.get("kernel", "?"), f.get("arch", "?"), _bytes(f.get("page", "")),
            _bytes(f.get("pmd", "")), hugetlb, f.get("nodes", "?"), thp, str(guest.passed),
            str(len(guest.failed)), str(len(guest.skipped)), f"{guest.seconds}s"]


HEADER = ["guest", "kernel", "arch", "page", "PMD", "hugetlb", "nodes", "THP", "passed",
          "failed", "skipped", "time"]


def table(guests, markdown=False):
    """The table, then the failures and skips, as text."""
    rows = [HEADER] + [row(g) for g in guests]
    out = []
    if markdown:
        out.append("| " + " | ".join(HEADER) + " |")
        out.append("|" + "|".join("---" for _ in HEADER) + "|")
        out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    else:
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for g in guests:
        for test, why in g.failed:
            out.append(f"FAILED  {g.name}: {test}: {why}")
    for g in guests:
        for test, why in g.skipped:
            out.append(f"skipped {g.name}: {test}: {why}")
    return "\n".join(out)


def main(argv):
    markdown = "--markdown" in argv
    paths = [a for a in argv if a != "--markdown"]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    guests = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            name = path.rsplit("/", 1)[-1].removesuffix(".log")
            guests.append(parse(f.read(), name))
    print(table(guests, markdown))
    return 1 if any(g.failed for g in guests) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
