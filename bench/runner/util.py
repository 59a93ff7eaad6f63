"""Small helpers shared by the modules: sizes, numbers, files, logging."""

import argparse
import math
import re
import sys
from pathlib import Path

MiB = 1 << 20
GiB = 1 << 30


def log(msg):
    print(f"==> {msg}", file=sys.stderr, flush=True)


# The one size grammar of the benchmark, as hugepage_bench's parse_size (bench/main.cpp) reads it:
# digits, an optional fraction, an optional K, M, G or T (any case, optionally followed by B or
# iB), binary units; bytes without a unit; a whole number of bytes above 0.
SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)(?:([KMGTkmgt])(B|iB)?)?")


def parse_size(text):
    m = SIZE_RE.fullmatch(text)
    bytes_ = None
    if m:
        shift = {None: 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2) and m.group(2).upper()]
        value = float(m.group(1)) * (1 << shift)
        if value >= 1 and value == int(value):
            bytes_ = int(value)
    if bytes_ is None:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 4M, 256MiB, 1.5G, 4096)")
    return bytes_


def size_flag(n):
    """A byte count as the binary's --sizes takes it (the same grammar): 1G, 64M, 512K, 1000."""
    for unit, shift in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def fmt_size(n):
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def short_size(n):
    return fmt_size(n).replace(" ", "").replace("iB", "")


def read_text(path, default=""):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def fmt_num(x, digits=3):
    """A number with about `digits` significant digits, '-' for missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"
