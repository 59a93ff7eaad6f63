#!/usr/bin/env bash
# ctest BenchBundle.DamagedBundleIsRefused: scripts/bundle --check refuses a bundle that cannot run,
# each with its reason: a truncated library, a library swapped for another (ldd passes both: it
# compares paths), a missing runner file, and a MANIFEST that is empty or lists a library not
# there; an intact bundle passes, and one at a path with a space is refused with the reason (the
# peers are preloaded by path, and LD_PRELOAD splits at spaces). Usage: check_bundle_damaged.sh
# SCRIPT BUNDLE_DIR
set -uo pipefail
script=$1 bundle=$2
[ -x "$bundle/hugepage_bench" ] || { echo "no bundle at $bundle (BenchBundle makes it)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
# expect_refused NAME REASON DAMAGE...: copies the bundle, damages it, and wants --check to fail
# with REASON in its last line.
expect_refused() {
  local name=$1 reason=$2
  shift 2
  rm -rf "$work/b"
  cp -r "$bundle" "$work/b"
  (cd "$work/b" && "$@")
  if "$script" --check "$work/b" >"$work/out" 2>&1; then
    echo "FAIL $name: --check passed"
    failed=1
  elif ! tail -1 "$work/out" | grep -q -- "$reason"; then
    echo "FAIL $name: --check failed without '$reason': $(tail -1 "$work/out")"
    failed=1
  else
    echo "ok $name: $(tail -1 "$work/out" | cut -c1-160)"
  fi
}
expect_refused truncated-library "hugepage_bench does not run" truncate -s 0 libstdc++.so.6
expect_refused swapped-library "hugepage_bench does not run" cp libgcc_s.so.1 libfmt.so.9
expect_refused missing-runner "bench/run.py is missing" rm bench/run.py
expect_refused empty-manifest "MANIFEST is not one scripts/bundle wrote" truncate -s 0 MANIFEST
expect_refused manifest-without-library "MANIFEST lists libgone.so.1, which is not in" \
  sh -c 'echo "  libgone.so.1 <- /usr/lib/libgone.so.1" >>MANIFEST'
expect_refused manifest-without-peer "MANIFEST does not list libjemalloc.so.2" \
  sed -i '/libjemalloc.so.2 <- /d' MANIFEST
mkdir "$work/with space"
cp -r "$bundle" "$work/with space/b"
if "$script" --check "$work/with space/b" >"$work/out" 2>&1; then
  echo "FAIL: a bundle at a path with a space passed the check (its peers cannot be preloaded)"
  failed=1
elif ! tail -1 "$work/out" | grep -q "LD_PRELOAD), which splits at spaces and colons"; then
  echo "FAIL: a bundle at a path with a space is refused without the reason: $(tail -1 "$work/out")"
  failed=1
else
  echo "ok path-with-space: $(tail -1 "$work/out" | cut -c1-160)"
fi
"$script" --check "$bundle" >"$work/out" 2>&1 || { echo "FAIL: the intact bundle is refused:"; cat "$work/out"; failed=1; }
[ "$failed" = 0 ] && echo "1 intact bundle passed, 6 damaged ones and 1 at a path with a space refused"
exit "$failed"
