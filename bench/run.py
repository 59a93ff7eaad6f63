#!/usr/bin/python3
"""Runs hugepage_bench under our allocators and under the peers users run today, side by side.

The runner is the package bench/runner (see its __init__.py for the modules); this file is its
entry point, kept for scripts/bench and the docs. `bench/run.py --help` lists the options.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runner.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
