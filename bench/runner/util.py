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


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 4M, 64M, 1G)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2).upper()]


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
