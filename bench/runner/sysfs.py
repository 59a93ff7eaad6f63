"""Machine-wide kernel settings that a configuration runs under (THP `always`, a faster
khugepaged): written before that configuration's process starts and put back when it ends, also
when it fails, raises or the runner is stopped (SIGTERM and SIGINT unwind through `applied`).

THP's mode file reads "always [madvise] never": the value in brackets is the one in force, and
the one written back.
"""

import contextlib
import os
import re
import signal
import sys

THP = "/sys/kernel/mm/transparent_hugepage"
THP_ENABLED = f"{THP}/enabled"
KHUGEPAGED_SLEEP = f"{THP}/khugepaged/scan_sleep_millisecs"
KHUGEPAGED_PAGES = f"{THP}/khugepaged/pages_to_scan"


def current(path):
    """The value in force in a sysfs file: the bracketed choice of a mode file, else the text."""
    with open(path) as f:
        text = f.read().strip()
    chosen = re.search(r"\[([^\]]+)\]", text)
    return chosen.group(1) if chosen else text


def why_not(settings):
    """Why these settings cannot be applied by this process, in words, or ""."""
    if not settings:
        return ""
    if os.geteuid() != 0:
        return "needs root to write " + ", ".join(sorted(settings))
    for path in settings:
        if not os.path.exists(path):
            return f"{path} does not exist on this kernel"
        if not os.access(path, os.W_OK):
            return f"{path} is not writable"
    return ""


class SettingError(RuntimeError):
    """A setting could not be written (the ones before it are put back)."""


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


@contextlib.contextmanager
def applied(settings, note=lambda text: None):
    """Writes each path's value for the duration of the block, in order, and writes every
    previous value back in reverse order afterwards, whatever happens in the block. `note` gets a
    line for each write, and for each restore. Raises SettingError when a write fails (what was
    written before it is put back first)."""
    saved = []
    try:
        for path, value in settings.items():
            try:
                before = current(path)
                write(path, value)
            except OSError as e:
                raise SettingError(f"cannot set {path} to {value}: {e}") from e
            saved.append((path, before))
            note(f"sysfs: {path} = {value} (was {before})")
        yield
    finally:
        for path, before in reversed(saved):
            write(path, before)
            note(f"sysfs: {path} restored to {before}")


def exit_on_sigterm():
    """SIGTERM ends the runner as SIGINT does (an exception), so that `applied` restores."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
