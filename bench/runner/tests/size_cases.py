"""The --sizes grammar as cases: what hugepage_bench and the runner (runner.util) both accept, with
the bytes, and what both refuse. test_util checks the runner against them, check_flags the
binary."""

MiB = 1 << 20
GiB = 1 << 30

# One size each.
ACCEPTED = {
    "4M": 4 * MiB, "4m": 4 * MiB, "4MB": 4 * MiB, "4MiB": 4 * MiB, "256MiB": 256 * MiB,
    "1.5G": 3 * GiB // 2, "0.5K": 512, "4096": 4096, "1": 1, "4T": 4 << 40,
    "4194304T": 1 << 62,  # the largest: 2^62
    "9007199254740993": 9007199254740993,  # 2^53 + 1: exact, no rounding through a double
    "4611686018427387903": (1 << 62) - 1, "1.5000000000000000000000K": 1536,
    "0.0009765625K": 1, "00000000000000000000004M": 4 * MiB,  # exact fractions, leading zeros
}

REFUSED = [
    "0", "0M", "-1M", "+4M", "1.5", "0.3K", "garbage", "4Q", "4MiBs", "4Mb", "4mib", "4MIB", "1e3",
    " 4M", "4M ", "4 M", ".5M", "5.M", "0x10M", "16E",
    "4194305T", "99999999999999999999", "18446744073709551616", "9" * 400,  # above 2^62
    "4611686018427387905",  # 2^62 + 1, which a double would round to 2^62
    "1.99999999999999999999", "1.00000000000000000001K", "0.000001T",  # not whole
    "0.0000000000000000000000000000001T",
    "\u0664M", "\uff14M", "\u0664",  # Arabic-Indic and fullwidth digits: ASCII digits only
]

# Whole --sizes values.
LISTS_ACCEPTED = {"4M,64M,1G": [4 * MiB, 64 * MiB, GiB], "1G": [GiB]}
LISTS_REFUSED = {
    "": "--sizes= names no size (e.g. --sizes=4M,64M,1G)",
    "4M,,64M": "empty size in --sizes=4M,,64M (e.g. --sizes=4M,64M,1G)",
    ",4M": "empty size in --sizes=,4M (e.g. --sizes=4M,64M,1G)",
    "4M,": "empty size in --sizes=4M, (e.g. --sizes=4M,64M,1G)",
    ",": "empty size in --sizes=, (e.g. --sizes=4M,64M,1G)",
    "4M,4X": "bad size '4X' (e.g. 4M, 256MiB, 1.5G, 4096)",
}

# Name lists (--suites, --allocators) refuse an empty list or element as --sizes does: flag value
# -> the message, the same from the binary and the runner.
NAME_LISTS_REFUSED = {
    ("--suites", ""): "--suites= names nothing",
    ("--suites", "Map_Lookup,,FlatHashMap_Lookup"):
        "empty name in --suites=Map_Lookup,,FlatHashMap_Lookup",
    ("--suites", ","): "empty name in --suites=,",
    ("--allocators", ""): "--allocators= names nothing",
    ("--allocators", "std,"): "empty name in --allocators=std,",
    ("--allocators", ",thp"): "empty name in --allocators=,thp",
}
