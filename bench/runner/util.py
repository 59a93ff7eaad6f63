"""Small helpers shared by the modules: sizes, numbers, files, logging."""

import argparse
import math
import re
import sys

MiB = 1 << 20
GiB = 1 << 30


def log(msg):
    print(f"==> {msg}", file=sys.stderr, flush=True)


# The one size grammar of the benchmark, as hugepage_bench's parse_size (bench/main.cpp) reads it:
# ASCII digits, an optional fraction, an optional K, M, G or T (any case, optionally followed by B
# or iB), binary units; bytes without a unit; a whole number of bytes from 1 to 2^62. The value
# is a double there and here, so both round a long number the same way.
SIZE_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(?:([KMGTkmgt])(B|iB)?)?")
MAX_SIZE = 1 << 62


def parse_size(text):
    m = SIZE_RE.fullmatch(text)
    bytes_ = None
    if m:
        shift = {None: 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2) and m.group(2).upper()]
        # Exactly, as the binary computes it: digits m over 10^f (f fraction digits, trailing
        # zeros off), at most 19 significant digits, times 2^shift.
        whole, _, fraction = m.group(1).partition(".")
        fraction = fraction.rstrip("0")
        digits = (whole + fraction).lstrip("0")
        value, rest = divmod(int(digits or "0") << shift, 10 ** len(fraction))
        if len(digits) <= 19 and rest == 0 and 1 <= value <= MAX_SIZE:
            bytes_ = value
    if bytes_ is None:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 4M, 256MiB, 1.5G, 4096)")
    return bytes_


def parse_size_list(text):
    """--sizes=A,B,...: at least one size and no empty one, as hugepage_bench reads it."""
    if not text:
        raise argparse.ArgumentTypeError("--sizes= names no size (e.g. --sizes=4M,64M,1G)")
    parts = text.split(",")
    if "" in parts:
        raise argparse.ArgumentTypeError(
            f"empty size in --sizes={text} (e.g. --sizes=4M,64M,1G)")
    return [parse_size(s) for s in parts]


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


def fmt_num(x, digits=3):
    """A number with about `digits` significant digits, '-' for missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"
