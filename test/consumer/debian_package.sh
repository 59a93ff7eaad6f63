#!/usr/bin/env bash
# usage: debian_package.sh BUILD_DIR CMAKE CPACK CXX VERSION
# The Debian package as a user meets it: built with CPack from BUILD_DIR, installed with dpkg, a
# consumer built against it with CMake (find_package) and with pkg-config, the installed
# hugepage-doctor run, then purged, and every path it added checked gone.
# Needs root: otherwise it skips (exit 77) with the reason, or fails under HUGEPAGE_REQUIRE=1. It
# also skips where a hugepage package is already installed or a file of the package already
# exists, so as to replace nothing; and it purges the package on any failure after installing.
set -euo pipefail

build_dir=$1 cmake=$2 cpack=$3 cxx=$4 version=$5
consumer_dir=$(cd "$(dirname "$0")" && pwd)
package=hugepage

skip() {
  if [ "${HUGEPAGE_REQUIRE:-}" = 1 ]; then
    echo "HUGEPAGE_REQUIRE=1, but the test would skip: $*" >&2
    exit 1
  fi
  echo "skipped: $*" >&2
  exit 77
}
fail() {
  echo "FAILED: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || skip "needs root: installs and removes a Debian package with dpkg"
for tool in dpkg dpkg-deb dpkg-query dpkg-shlibdeps file pkg-config; do
  command -v "$tool" >/dev/null || skip "$tool not found (apt-get install dpkg-dev file pkgconf)"
done
status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
case "$status" in
  "" | not-installed) ;;
  *) skip "a $package package is already on this system ($status); the test would replace it" ;;
esac

work=$(mktemp -d)
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then
    dpkg --purge "$package" >/dev/null || echo "could not purge $package" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Build the package, from the build tree as it is.
"$cpack" -G DEB -B "$work/cpack" --config "$build_dir/CPackConfig.cmake" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack -G DEB"; }
debs=("$work"/cpack/*.deb)
if [ ${#debs[@]} -ne 1 ] || [ ! -f "${debs[0]}" ]; then
  fail "cpack made no single .deb: ${debs[*]}"
fi
deb=${debs[0]}

# Its control fields and contents.
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = "$package" ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version-1" ] || fail "Version: $(field Version), expected $version-1"
dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -e 's|^\./|/|' -e 's|/$||' | grep -v '^$' \
  >"$work/paths"
for expected in /usr/bin/hugepage-doctor /usr/include/hugepage/hugepage.hpp \
  '/usr/lib/(.*/)?cmake/hugepage/hugepage-config\.cmake' /usr/share/pkgconfig/hugepage.pc \
  /usr/share/doc/hugepage/copyright; do
  grep -Eqx "$expected" "$work/paths" || fail "the package lacks $expected"
done
config_dir=$(grep -Ex '.*/cmake/hugepage/hugepage-config\.cmake' "$work/paths")
config_dir=${config_dir%/*}
includedir=$(grep -x '.*/hugepage/hugepage\.hpp' "$work/paths")
includedir=${includedir%/hugepage/hugepage.hpp}

# Replace nothing: a file of the package that exists already is someone else's.
while read -r path; do
  if [ -e "$path" ] || [ -L "$path" ]; then
    [ -d "$path" ] || skip "$path exists already and would be overwritten"
    echo "$path"
  fi
done <"$work/paths" >"$work/before"

installed=1
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i $deb"; }
[ "$(dpkg-query -W -f='${Version}' "$package")" = "$version-1" ] || fail "not installed"

# Depends names the package of every shared library the installed doctor loads.
depends=$(field Depends)
owner_of() {
  local path=$1 real candidate
  real=$(realpath "$path")
  for candidate in "$path" "$real" "${real#/usr}"; do
    dpkg -S "$candidate" 2>/dev/null | sed -n 's|^\([^:, ]*\)\(:[a-z0-9]*\)\?: /.*|\1|p' | head -1 |
      grep . && return 0
  done
  return 1
}
while read -r library path; do
  owner=$(owner_of "$path") || fail "no package owns $path, which hugepage-doctor loads"
  [[ ", $depends," == *", $owner "* || ", $depends," == *", $owner,"* ]] ||
    fail "Depends ($depends) lacks $owner, the package of $library"
done < <(ldd /usr/bin/hugepage-doctor | sed -n 's|^\s*\(\S*\) => \(/\S*\) .*|\1 \2|p')

# A consumer through find_package, which must find the installed config, and through pkg-config.
"$cmake" -DSOURCE="$consumer_dir/find_package" -DBINARY="$work/find-package" -DCXX="$cxx" \
  -P "$consumer_dir/build_and_run.cmake" || fail "the find_package consumer"
grep -qx "hugepage_DIR:PATH=$config_dir" "$work/find-package/CMakeCache.txt" ||
  fail "find_package found $(grep '^hugepage_DIR' "$work/find-package/CMakeCache.txt"), not $config_dir"
"$cmake" -DBINARY="$work/pkg-config" -DCXX="$cxx" -DINCLUDEDIR="$includedir" \
  -DVERSION="$version" -P "$consumer_dir/pkg_config.cmake" || fail "the pkg-config consumer"
echo "consumer (pkg-config): flags '$(pkg-config --cflags --libs hugepage)' ($includedir is a system directory)"

# The installed doctor, from PATH: its version, and a system check (0 healthy, 1 warnings).
[ "$(command -v hugepage-doctor)" = /usr/bin/hugepage-doctor ] ||
  fail "hugepage-doctor on PATH is $(command -v hugepage-doctor || echo nothing)"
[ "$(hugepage-doctor --version)" = "hugepage-doctor $version" ] ||
  fail "hugepage-doctor --version: $(hugepage-doctor --version)"
rc=0
hugepage-doctor >"$work/doctor.txt" 2>&1 || rc=$?
{ [ "$rc" -le 1 ] && grep -q '^Transparent huge pages' "$work/doctor.txt"; } ||
  { cat "$work/doctor.txt"; fail "hugepage-doctor exited $rc"; }
echo "hugepage-doctor: exit $rc"

# Purge, and nothing of the package left: exactly the paths that existed before remain.
dpkg --purge "$package" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge"; }
installed=0
status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
[ -z "$status" ] || [ "$status" = not-installed ] || fail "after purge: $status"
while read -r path; do
  if [ -e "$path" ] || [ -L "$path" ]; then echo "$path"; fi
done <"$work/paths" >"$work/after"
diff "$work/before" "$work/after" >&2 || fail "the purge left these paths behind (> lines)"
echo "installed $(basename "$deb"), built both consumers, ran the doctor, purged: nothing left"
