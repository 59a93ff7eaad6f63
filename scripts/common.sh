# Shared by scripts/test and scripts/bench: package set-up and hugetlb pool reservation.
# Sourced, not run.

HUGEPAGE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HUGEPAGE_JOBS=${HUGEPAGE_JOBS:-$(nproc)}

# Each line says the time of day: CI's log then shows what every step cost.
log() { printf '==> %s %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_packages PKG...: installs the missing Debian packages when root; otherwise prints the
# exact apt-get line and stops.
ensure_packages() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    die "missing packages; install them with: sudo apt-get install -y ${missing[*]}"
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed"
  apt-get install -y -qq "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

BUILD_PACKAGES=(cmake make g++ libabsl-dev libbenchmark-dev libgtest-dev libgmock-dev libfmt-dev
  nlohmann-json3-dev libcli11-dev)
# scripts/test only: the HeadersCompileForAarch64 test; libpfm4 for linting perf_events_pfm.hpp;
# python3 for the bench runner's unit tests (BenchRunner.*); dpkg-dev and file for CPack's Debian
# package (dpkg-shlibdeps) and pkgconf for the consumers (ConsumerPkgConfig, ConsumerDebianPackage).
# patchelf and the peers' libraries for the bench bundle (scripts/bundle, ctest BenchBundle).
# scripts/fuzz (and scripts/test's fuzz step): clang, and libFuzzer's runtime, which Debian 12 ships
# in libclang-rt-14-dev (only recommended by clang-14, so named here).
FUZZ_PACKAGES=(clang libclang-rt-14-dev)
TEST_PACKAGES=(g++-aarch64-linux-gnu libpfm4-dev python3 dpkg-dev file pkgconf patchelf libjemalloc2
  libmimalloc2.0)

# Pool reservation: remembers the sizes before, restores them on exit (also on failure).
POOL_2M=/proc/sys/vm/nr_hugepages
POOL_1G=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
_saved_2m=""
_saved_1g=""

restore_pools() {
  [ -n "$_saved_2m" ] && echo "$_saved_2m" >"$POOL_2M" 2>/dev/null
  [ -n "$_saved_1g" ] && echo "$_saved_1g" >"$POOL_1G" 2>/dev/null
  [ -n "$_saved_2m$_saved_1g" ] && log "hugetlb pools restored (2 MiB: $_saved_2m, 1 GiB: ${_saved_1g:-n/a})"
  _saved_2m=""
  _saved_1g=""
}

# tracefs, where the scenarios count their own process's entries into direct compaction
# (bench/own_compactions.hpp) and a test checks that counting. Debian mounts it at boot; a bare
# VM may not. Root only; it stays mounted (a pseudo-filesystem: no setting of the machine changes).
mount_tracefs() {
  [ "$(id -u)" -eq 0 ] || return 0
  [ -e /sys/kernel/tracing/events ] && return 0
  if mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
    log "mounted tracefs on /sys/kernel/tracing (the scenarios' own direct compactions)"
  else
    log "tracefs could not be mounted: the scenarios' own direct compactions go uncounted"
  fi
}

# reserve_pools PAGES_2M PAGES_1G: grows the pools to at least the given free counts.
# Sets POOLS_RESERVED=1 when the 2 MiB pool has them, POOL_1G_RESERVED=1 for the 1 GiB pool.
reserve_pools() {
  local want_2m=$1 want_1g=$2
  POOLS_RESERVED=0
  POOL_1G_RESERVED=0
  if [ "$(id -u)" -ne 0 ] || [ ! -w "$POOL_2M" ]; then
    log "not root: hugetlb pools left as they are; tests that need them will skip"
    return 0
  fi
  trap restore_pools EXIT
  _saved_2m=$(cat "$POOL_2M")
  local free_2m total
  free_2m=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)
  if [ "$free_2m" -lt "$want_2m" ]; then
    total=$((_saved_2m + want_2m - free_2m))
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    echo "$total" >"$POOL_2M" || true
  fi
  free_2m=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)
  if [ "$free_2m" -ge "$want_2m" ]; then
    POOLS_RESERVED=1
    log "2 MiB pool: $free_2m free pages"
  else
    total=$(cat "$POOL_2M")
    log "2 MiB pool: $free_2m free of the $want_2m wanted; reserved $((total - _saved_2m)) more" \
      "page(s) (now $total in all), the rest could not be had (memory too fragmented)"
  fi
  if [ "$want_1g" -gt 0 ] && [ -w "$POOL_1G" ]; then
    _saved_1g=$(cat "$POOL_1G")
    local free_1g
    free_1g=$(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages)
    if [ "$free_1g" -lt "$want_1g" ]; then
      echo $((_saved_1g + want_1g - free_1g)) >"$POOL_1G" 2>/dev/null || true
    fi
    free_1g=$(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages)
    if [ "$free_1g" -ge "$want_1g" ]; then
      POOL_1G_RESERVED=1
      log "1 GiB pool: $free_1g free pages"
    else
      local total_1g
      total_1g=$(cat "$POOL_1G" 2>/dev/null || echo "$_saved_1g")
      log "1 GiB pool: $free_1g free of the $want_1g wanted; reserved $((total_1g - _saved_1g))" \
        "more page(s) (now $total_1g in all), the rest could not be had (memory too fragmented" \
        "or no 1 GiB support)"
    fi
  fi
}

# without_1g_pages CMD...: runs CMD as on a CPU without 1 GiB pages: the 1 GiB pool emptied (so
# the kernel cannot hand out such pages behind the hidden directory either) and its sysfs
# directory hidden by an empty one in a private mount namespace; the pool is restored after.
# Needs root and a 1 GiB pool to hide; otherwise says so and returns 0 without running CMD.
without_1g_pages() {
  local sysfs=${POOL_1G%/*}
  if [ "$(id -u)" -ne 0 ] || [ ! -d "$sysfs" ]; then
    log "skipping '$*' without 1 GiB pages: needs root and a 1 GiB pool to hide"
    return 0
  fi
  local saved_1g empty rc=0
  saved_1g=$(cat "$POOL_1G")
  echo 0 >"$POOL_1G"
  empty=$(mktemp -d)
  unshare -m bash -c 'mount --make-rprivate / && mount --bind "$1" "$2" && shift 2 && exec "$@"' \
    _ "$empty" "$sysfs" "$@" || rc=$?
  echo "$saved_1g" >"$POOL_1G" || true
  rmdir "$empty"
  return "$rc"
}

# run_supervised CMD...: runs CMD in a session (and process group) of its own and waits for it;
# returns its exit status. SIGTERM, SIGINT or SIGHUP to this script is passed to CMD as SIGTERM
# (the runner then stops the benchmark it runs and makes the tables of what finished); whatever of
# CMD's group still runs HUGEPAGE_STOP_GRACE_S seconds later (default 30) is killed, and this
# script exits with 128 + the signal only when nothing of the group is left: its EXIT trap
# (restore_pools) never takes the pools from under a benchmark still running.
run_supervised() {
  _supervised=""
  # The traps first: a signal that comes as CMD starts finds them.
  trap '_stop_supervised HUP 1' HUP
  trap '_stop_supervised INT 2' INT
  trap '_stop_supervised TERM 15' TERM
  setsid "$@" &
  _supervised=$!
  local rc=0
  wait "$_supervised" || rc=$?
  trap - HUP INT TERM
  return "$rc"
}

# The processes of session $1 (CMD's, which setsid made) that have not ended, one per line.
_session_members() {
  ps -s "$1" -o pid=,stat= | awk '$2 !~ /^Z/ { print $1 }'
}

_stop_supervised() {
  local name=$1 number=$2 group=$_supervised grace=${HUGEPAGE_STOP_GRACE_S:-30}
  trap '' HUP INT TERM  # one stop at a time
  if [ -n "$group" ]; then
    log "SIG$name: stopping $group and what it started (up to $grace s) before anything is restored"
    kill -TERM "$group" 2>/dev/null || true
    local until=$((SECONDS + grace))
    while [ -n "$(_session_members "$group")" ] && [ "$SECONDS" -lt "$until" ]; do sleep 0.2; done
    if [ -n "$(_session_members "$group")" ]; then
      log "still running after $grace s: $(_session_members "$group" | tr '\n' ' ')- killed"
      kill -KILL -- "-$group" 2>/dev/null || true
      while [ -n "$(_session_members "$group")" ]; do sleep 0.1; done
    fi
    wait "$group" 2>/dev/null || true
  fi
  exit $((128 + number))
}
