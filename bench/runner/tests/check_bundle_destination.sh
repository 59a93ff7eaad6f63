#!/usr/bin/env bash
# ctest BenchBundle.DestinationIsChecked: scripts/bundle removes nothing it did not make, checks
# its inputs before it writes, and reads relative paths from where it is run. It runs from a copy
# of the scripts and the runner (a "repository" of its own with a docs/ to lose), packing from the
# bundle that BenchBundle made (a bundle holds both binaries). Usage: check_bundle_destination.sh
# SCRIPT BUNDLE_DIR
set -uo pipefail
script=$1 bundle=$2
[ -x "$bundle/hugepage_bench" ] || { echo "no bundle at $bundle (BenchBundle makes it)"; exit 1; }
src=$(cd "$(dirname "$script")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo/scripts" "$repo/bench/runner" "$repo/docs" "$work/cwd/docs" "$work/elsewhere"
cp "$script" "$src/scripts/common.sh" "$repo/scripts/"
cp "$src/bench/run.py" "$src/bench/run-large.sh" "$repo/bench/"
cp "$src"/bench/runner/*.py "$repo/bench/runner/"
echo keep >"$repo/docs/keep"
echo keep >"$work/cwd/docs/keep"
failed=0
fail() { echo "FAIL $*"; failed=1; }
# refused NAME REASON ARGS...: scripts/bundle ARGS, run in $at ($work/cwd), fails with REASON.
at=$work/cwd
refused() {
  local name=$1 reason=$2
  shift 2
  if (cd "$at" && "$repo/scripts/bundle" "$@") >"$work/out" 2>&1; then
    fail "$name: scripts/bundle $* passed"
  elif ! grep -q -- "$reason" "$work/out"; then
    fail "$name: refused without '$reason': $(tail -1 "$work/out")"
  else
    echo "ok $name: $(tail -1 "$work/out" | cut -c1-150)"
  fi
}
intact() {  # nothing of the user's was removed
  [ -f "$repo/docs/keep" ] || fail "$1: the repository's docs/ was removed"
  [ -f "$work/cwd/docs/keep" ] || fail "$1: docs/ in the working directory was removed"
}

# A mistyped --binaries, run from another directory, with a DIR that names the repository's docs/
# when read from the repository's root.
at=$work/elsewhere
refused mistyped-binaries "no-such-build is not a directory" --binaries no-such-build docs
intact mistyped-binaries
[ -e "$work/elsewhere/docs" ] && fail "mistyped-binaries: made docs/ before checking its inputs"
at=$work/cwd
# A directory that is not a bundle is never replaced.
refused not-a-bundle "docs exists and is not a bundle" --binaries "$bundle" docs
intact not-a-bundle
refused a-file "exists and is not a directory" --binaries "$bundle" docs/keep
intact a-file
refused space-in-path "splits at spaces and colons" --binaries "$bundle" "with space"
[ -e "$work/cwd/with space" ] && fail "space-in-path: made the directory"
# Relative paths are the caller's: BIN_DIR and DIR below $work/cwd, nothing in the repository.
cp -r "$bundle" "$work/cwd/from"
if (cd "$work/cwd" && "$repo/scripts/bundle" --binaries from new) >"$work/out" 2>&1; then
  [ -f "$work/cwd/new/MANIFEST" ] || fail "relative: no bundle in the working directory"
  [ -e "$repo/new" ] && fail "relative: the bundle went into the repository"
  echo "ok relative: $(grep -c . "$work/cwd/new/MANIFEST") MANIFEST lines in ./new"
else
  fail "relative: $(tail -3 "$work/out")"
fi
# A bundle repacked in place: still a bundle, and it passes the check.
if (cd "$work/cwd" && "$repo/scripts/bundle" --binaries new new) >"$work/out" 2>&1 &&
  "$repo/scripts/bundle" --check "$work/cwd/new" >"$work/out2" 2>&1; then
  echo "ok in-place: repacked, the check passes"
else
  fail "in-place: $(tail -3 "$work/out" "$work/out2" 2>/dev/null)"
fi
for left in "$work"/cwd/.bundle-new*; do
  [ -e "$left" ] && fail "a temporary directory was left behind: $left"
done
intact end
[ "$failed" = 0 ] && echo "4 destinations refused with nothing removed; relative paths and an in-place repack work"
exit "$failed"
