// tools/test/doctor_advice_test.cpp - each advice rule, from a hand-made system or process state.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "report.hpp"
#include "text.hpp"

namespace hugepage::doctor {
namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t gib = std::size_t{1} << 30;

// A machine with nothing to advise: THP madvise, conservative khugepaged, a pool with room,
// unfragmented memory, no THP fallbacks, no cgroup limits.
system_report healthy_system() {
  system_report s;
  s.kernel_release = "6.8.0-test";
  s.thp.enabled = "madvise";
  s.thp.defrag = "madvise";
  s.thp.shmem_enabled = "never";
  s.thp.max_ptes_none = 64;
  hugetlb_pool pool;
  pool.page_bytes = 2 * mib;
  pool.total = 600;
  pool.free = 500;
  pool.reserved = 0;
  pool.surplus = 0;
  pool.overcommit = 0;
  s.pools.push_back(pool);
  s.zones = std::vector<zone_readiness>{{0, "Normal", 4 * gib, 3 * gib, 1536}};
  s.vmstat = {{"thp_fault_alloc", 10000}, {"thp_fault_fallback", 10}};
  s.vmstat_readable = true;
  s.meminfo = {{"MemTotal", 32 * gib}, {"Hugepagesize", 2 * mib}};
  s.meminfo_readable = true;
  s.collapse = collapse_support::works;
  return s;
}

// A stock kernel as installed: THP always (Debian) or madvise, defrag madvise, khugepaged's
// max_ptes_none at its default 511, and a pool sized exactly for what uses it, all in use.
system_report stock_system(const char* enabled) {
  system_report s = healthy_system();
  s.thp.enabled = enabled;
  s.thp.max_ptes_none = 511;
  s.pools[0].total = 600;
  s.pools[0].free = 0;
  s.pools[0].reserved = 0;
  return s;
}

const advice& only(const std::vector<advice>& list, const std::string& id) {
  static const advice none{};
  for (const auto& a : list) {
    if (a.id == id) return a;
  }
  ADD_FAILURE() << "no advice " << id;
  return none;
}

std::string all_commands(const std::vector<advice>& list) {
  std::string out;
  for (const auto& a : list) {
    for (const auto& c : a.commands) out += c + "\n";
  }
  return out;
}

// A copy, so that find(advise_system(s), ...) does not point into a destroyed temporary.
std::optional<advice> find(const std::vector<advice>& list, const std::string& id) {
  const auto it =
      std::find_if(list.begin(), list.end(), [&](const advice& a) { return a.id == id; });
  if (it == list.end()) return std::nullopt;
  return *it;
}

std::string ids(const std::vector<advice>& list) {
  std::string out;
  for (const auto& a : list) out += a.id + " ";
  return out;
}

TEST(DoctorAdvice, HealthySystemGetsNone) {
  const auto list = advise_system(healthy_system());
  EXPECT_TRUE(list.empty()) << ids(list);
}

TEST(DoctorAdvice, StockSystemIsHealthy) {
  // Exit 0 must be reachable on a machine nobody tuned: the stock max_ptes_none and a fully
  // used, exactly sized pool are notes, not warnings.
  for (const char* enabled : {"always", "madvise"}) {
    const auto list = advise_system(stock_system(enabled));
    EXPECT_FALSE(has_warning(list)) << enabled << ": " << ids(list);
    EXPECT_EQ(only(list, "max_ptes_none").level, advice_level::note);
    EXPECT_EQ(only(list, "pool_in_use").level, advice_level::note);
    EXPECT_TRUE(only(list, "pool_in_use").commands.empty());
    EXPECT_EQ(find(list, "pool_exhausted"), std::nullopt) << ids(list);
  }
}

TEST(DoctorAdvice, ThpNever) {
  system_report s = healthy_system();
  s.thp.enabled = "never";
  const auto list = advise_system(s);
  const advice& a = only(list, "thp_never");
  EXPECT_EQ(a.level, advice_level::warning);
  ASSERT_EQ(a.commands.size(), 2u);
  EXPECT_EQ(a.commands[0], "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled");
  EXPECT_EQ(a.commands[1],
            "printf '%s\\n' 'w /sys/kernel/mm/transparent_hugepage/enabled - - - - madvise' > "
            "/etc/tmpfiles.d/hugepage-doctor-enabled.conf");
  EXPECT_TRUE(has_warning(list));
}

TEST(DoctorAdvice, MaxPtesNoneIsANoteWithItsEvidence) {
  system_report s = healthy_system();
  s.thp.max_ptes_none = 511;
  s.vmstat["thp_underused_split_page"] = 0;
  const auto list = advise_system(s);
  const advice& a = only(list, "max_ptes_none");
  EXPECT_EQ(a.level, advice_level::note);
  EXPECT_NE(a.message.find("up to 512x"), std::string::npos) << a.message;
  ASSERT_EQ(a.evidence.size(), 2u);
  EXPECT_EQ(a.evidence[0], "/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none: 511");
  EXPECT_NE(a.evidence[1].find("split underused THPs"), std::string::npos);
  ASSERT_FALSE(a.commands.empty());
  EXPECT_EQ(a.commands[0],
            "echo 64 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none");
  EXPECT_FALSE(has_warning(list));
}

TEST(DoctorAdvice, DefragSettings) {
  system_report s = healthy_system();
  s.thp.enabled = "always";
  s.thp.defrag = "always";
  const auto stall = find(advise_system(s), "defrag_always_stalls");
  ASSERT_NE(stall, std::nullopt);
  EXPECT_EQ(stall->commands.at(0),
            "echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag");
  s.thp.enabled = "madvise";
  s.thp.defrag = "never";
  ASSERT_NE(find(advise_system(s), "defrag_never"), std::nullopt);
}

TEST(DoctorAdvice, ExhaustedOnlyWhenSomethingWantedMore) {
  system_report s = healthy_system();
  s.pools[0].free = 40;
  s.pools[0].reserved = 40;  // all free pages promised to mappings: in use, not short
  auto list = advise_system(s);
  EXPECT_EQ(find(list, "pool_exhausted"), std::nullopt) << ids(list);
  EXPECT_EQ(only(list, "pool_in_use").level, advice_level::note);
  // Reservations beyond the free pages: something wanted more.
  s.pools[0].reserved = 41;
  list = advise_system(s);
  const advice& a = only(list, "pool_exhausted");
  EXPECT_EQ(a.level, advice_level::warning);
  ASSERT_EQ(a.commands.size(), 2u);
  EXPECT_EQ(a.commands[0], "echo 750 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
  EXPECT_EQ(a.commands[1],
            "printf '%s\\n' 'vm.nr_hugepages = 750' > "
            "/etc/sysctl.d/90-hugepage-doctor-nr_hugepages.conf");
  // Surplus pages at the overcommit limit, with failed buddy allocations.
  s.pools[0].reserved = 0;
  s.pools[0].free = 0;
  s.pools[0].overcommit = 10;
  s.pools[0].surplus = 10;
  s.vmstat["htlb_buddy_alloc_fail"] = 3;
  EXPECT_EQ(only(advise_system(s), "pool_exhausted").evidence.size(), 3u);
  // A cgroup limit that refused (v2 hugetlb.2MB.events "max 2") also shows demand.
  s.vmstat.erase("htlb_buddy_alloc_fail");
  s.pools[0].surplus = 0;
  s.pools[0].overcommit = 0;
  EXPECT_EQ(find(advise_system(s), "pool_exhausted"), std::nullopt);
  hugetlb_limit limit;
  limit.page_bytes = 2 * mib;
  limit.version = "v2";
  limit.directory = "/sys/fs/cgroup/app.slice";
  limit.refused = 2;
  s.cgroup.limits.push_back(limit);
  const advice refused = only(advise_system(s), "pool_exhausted");
  EXPECT_EQ(refused.evidence.back(),
            "hugetlb cgroup /sys/fs/cgroup/app.slice refused 2 times (events max 2)");
  // A pool that was never reserved is not "exhausted": not everyone wants one.
  s.pools[0].total = 0;
  s.pools[0].free = 0;
  EXPECT_EQ(find(advise_system(s), "pool_exhausted"), std::nullopt);
}

TEST(DoctorAdvice, PoolAdviceCappedByPhysicalMemory) {
  system_report s = healthy_system();
  s.meminfo["MemTotal"] = 2 * gib;  // 80%: 819 pages of 2 MiB
  s.pools[0].total = 800;
  s.pools[0].free = 0;
  s.pools[0].reserved = 1;
  EXPECT_EQ(only(advise_system(s), "pool_exhausted").commands.at(0),
            "echo 819 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
  s.pools[0].total = 900;  // already past the cap: no command, the cost says why
  const advice a = only(advise_system(s), "pool_exhausted");
  EXPECT_TRUE(a.commands.empty()) << all_commands({a});
  EXPECT_NE(a.trade.find("80% of MemTotal"), std::string::npos);
}

TEST(DoctorAdvice, CompactionOnlyWithFragmentationAndFallbacks) {
  system_report s = healthy_system();
  s.zones = std::vector<zone_readiness>{{0, "DMA", 15 * mib, 14 * mib, 7},
                                        {0, "Normal", 3 * gib, 64 * mib, 32}};
  // Fragmented, but faults do not fall back: a note, no command.
  auto list = advise_system(s);
  EXPECT_EQ(only(list, "fragmented").level, advice_level::note);
  EXPECT_EQ(all_commands(list).find("compact_memory"), std::string::npos);
  // Fragmented and falling back: compaction, with both facts.
  s.vmstat = {{"thp_fault_alloc", 1000}, {"thp_fault_fallback", 400}};
  list = advise_system(s);
  const advice& a = only(list, "fragmented");
  EXPECT_EQ(a.level, advice_level::warning);
  EXPECT_EQ(a.commands, std::vector<std::string>{"echo 1 > /proc/sys/vm/compact_memory"});
  EXPECT_EQ(a.evidence.size(), 2u);
  // Little free memory is not fragmentation; unknown buddyinfo neither.
  s.zones = std::vector<zone_readiness>{{0, "Normal", 100 * mib, 0, 0}};
  EXPECT_EQ(find(advise_system(s), "fragmented"), std::nullopt);
  s.zones.reset();
  EXPECT_EQ(find(advise_system(s), "fragmented"), std::nullopt);
}

TEST(DoctorAdvice, ThpFaultFallbacks) {
  system_report s = healthy_system();
  s.vmstat = {{"thp_fault_alloc", 1000}, {"thp_fault_fallback", 400}};
  auto a = find(advise_system(s), "thp_fault_fallback");
  ASSERT_NE(a, std::nullopt);
  EXPECT_NE(a->message.find("28.6%"), std::string::npos) << a->message;
  EXPECT_EQ(a->level, advice_level::note);  // memory not fragmented now: nothing to run
  EXPECT_TRUE(a->commands.empty());
  s.thp.defrag = "defer";
  a = find(advise_system(s), "thp_fault_fallback");
  ASSERT_NE(a, std::nullopt);
  EXPECT_EQ(a->level, advice_level::warning);
  EXPECT_EQ(a->commands.at(0), "echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag");
  s.vmstat = {{"thp_fault_alloc", 100000}, {"thp_fault_fallback", 400}};
  EXPECT_EQ(find(advise_system(s), "thp_fault_fallback"), std::nullopt);
}

TEST(DoctorAdvice, CgroupLimits) {
  system_report s = healthy_system();
  hugetlb_limit limit;
  limit.page_bytes = 2 * mib;
  limit.version = "v2";
  limit.directory = "/sys/fs/cgroup/app.slice";
  limit.has_max = true;
  limit.max = 256 * mib;  // pool is 1200 MiB
  limit.has_rsvd_max = true;
  limit.rsvd_max = std::nullopt;  // "max"
  s.cgroup.status = "v2";
  s.cgroup.limits.push_back(limit);
  const auto list = advise_system(s);
  EXPECT_EQ(only(list, "cgroup_limit_below_pool").commands.at(0),
            "echo max > /sys/fs/cgroup/app.slice/hugetlb.2MB.max");
  EXPECT_EQ(only(list, "cgroup_limit_at_fault").commands.at(0),
            "echo 268435456 > /sys/fs/cgroup/app.slice/hugetlb.2MB.rsvd.max");
}

TEST(DoctorAdvice, CpuWithout1GPages) {
  system_report s = healthy_system();
  s.cpu_1g_pages = false;
  const auto list = advise_system(s);
  EXPECT_EQ(only(list, "no_1g_pages").level, advice_level::note);
  EXPECT_FALSE(has_warning(list));
  s.cpu_1g_pages = true;
  EXPECT_TRUE(advise_system(s).empty());
}

// ---- process rules -----------------------------------------------------------------------------

// The title a hostile process could give itself: every command must be free of it.
const std::string hostile_name = "x;rm -rf ~;$(reboot)`id`\n\x1b[2J";

process_report big_process(const std::string& allocator,
                           std::vector<std::pair<std::string, std::string>> environment = {},
                           const std::string& version = "") {
  process_report p;
  p.pid = 4242;
  p.name = hostile_name;
  p.anonymous = 11 * gib;
  p.rss = 11 * gib + 100 * mib;
  p.thp = 22 * mib;  // 0.2 %
  p.base = p.rss - p.thp;
  p.thp_enabled = true;
  p.allocator = describe_allocator({allocator, "/lib/lib" + allocator + ".so", version}, true,
                                   std::move(environment));
  return p;
}

TEST(DoctorAdvice, JemallocWithoutThpAsADropInOrAnExport) {
  process_report p = big_process("jemalloc");
  auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "jemalloc_without_thp");
  EXPECT_EQ(a.message.rfind("11 GiB anonymous memory, 0.2% huge; jemalloc runs without", 0), 0u)
      << a.message;
  EXPECT_EQ(a.commands,
            std::vector<std::string>{"export MALLOC_CONF=thp:always,metadata_thp:auto"});
  p.unit = "fared.service";
  list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "jemalloc_without_thp").commands,
            (std::vector<std::string>{
                "mkdir -p /etc/systemd/system/fared.service.d && (set -C; printf '%s\\n' "
                "'[Service]' 'Environment=\"MALLOC_CONF=thp:always,metadata_thp:auto\"' > "
                "/etc/systemd/system/fared.service.d/zz-hugepage-doctor-MALLOC_CONF.conf)",
                "systemctl daemon-reload", "systemctl restart fared.service"}));
  EXPECT_NE(only(list, "jemalloc_without_thp").message.find("a drop-in of its own for fared"),
            std::string::npos);
}

// Runs `script` with /bin/sh; its exit status and stdout.
std::pair<int, std::string> run_shell(const std::string& script) {
  FILE* pipe = ::popen(("/bin/sh -c " + shell_quote(script)).c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string out;
  char buffer[256];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The value a printed "export NAME=..." command gives NAME in a POSIX shell.
std::string exported(const std::string& command, const std::string& name) {
  return run_shell(command + "; printf '%s' \"$" + name + "\"").second;
}

TEST(DoctorAdvice, EnvironmentSettingKeepsWhatIsThere) {
  // glibc: an existing tunable is kept, an existing hugetlb entry replaced where it stands and
  // its later duplicates dropped (the last one would win).
  auto list =
      advise_process(big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"}}, "2.36"),
                     healthy_system());
  const advice glibc = only(list, "glibc_without_hugetlb_tunable");
  EXPECT_EQ(glibc.commands,
            std::vector<std::string>{
                "export GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"});
  EXPECT_NE(std::find(glibc.evidence.begin(), glibc.evidence.end(),
                      "GLIBC_TUNABLES=glibc.malloc.arena_max=2 now (/proc/PID/environ): merged, "
                      "the rest kept"),
            glibc.evidence.end());
  list = advise_process(
      big_process("glibc",
                  {{"GLIBC_TUNABLES",
                    "glibc.malloc.hugetlb=0:glibc.malloc.arena_max=2::glibc.malloc.hugetlb=0"}},
                  "2.36"),
      healthy_system());
  EXPECT_EQ(only(list, "glibc_without_hugetlb_tunable").commands,
            std::vector<std::string>{
                "export GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2"});
  // jemalloc: MALLOC_CONF entries are key:value, comma-separated.
  list = advise_process(
      big_process("jemalloc", {{"MALLOC_CONF", "narenas:4,thp:never,dirty_decay_ms:1000"}}),
      healthy_system());
  EXPECT_EQ(only(list, "jemalloc_without_thp").commands,
            std::vector<std::string>{"export MALLOC_CONF=narenas:4,thp:always,dirty_decay_ms:1000,"
                                     "metadata_thp:auto"});
  // Java options: a later flag wins, so the flag is appended to what is there.
  process_report jvm = big_process("glibc", {{"JAVA_TOOL_OPTIONS", "-Xmx1g -Dx=1"}}, "2.36");
  jvm.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                               std::string("java\0Main", 9), jvm.allocator.settings);
  EXPECT_EQ(only(advise_process(jvm, healthy_system()), "jvm_without_thp").commands,
            std::vector<std::string>{
                "export 'JAVA_TOOL_OPTIONS=-Xmx1g -Dx=1 -XX:+UseTransparentHugePages'"});
  // An environment the doctor cannot read: no command that could drop what it holds.
  process_report unknown = big_process("jemalloc");
  unknown.allocator.environ_readable = false;
  unknown.runtime = jvm.runtime;
  const advice java = only(advise_process(unknown, healthy_system()), "jvm_without_thp");
  EXPECT_TRUE(java.commands.empty());
  EXPECT_NE(java.message.find("add -XX:+UseTransparentHugePages to JAVA_TOOL_OPTIONS by hand"),
            std::string::npos)
      << java.message;
}

TEST(DoctorAdvice, EnvironmentValueFromTheProcessIsQuotedOrRefused) {
  // Quotes, $, backticks: printable, so the command carries them, quoted; a shell gives the
  // variable exactly the merged value and runs nothing in it.
  const std::string hostile = "glibc.malloc.arena_max=2'$(touch /tmp/x)`id`\"; x";
  auto list =
      advise_process(big_process("glibc", {{"GLIBC_TUNABLES", hostile}}, "2.36"), healthy_system());
  const auto commands = only(list, "glibc_without_hugetlb_tunable").commands;
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0],
            "export 'GLIBC_TUNABLES=glibc.malloc.arena_max=2'\\''$(touch /tmp/x)`id`\"; "
            "x:glibc.malloc.hugetlb=1'");
  EXPECT_EQ(exported(commands[0], "GLIBC_TUNABLES"), hostile + ":glibc.malloc.hugetlb=1");
  // In a unit file '"' and '\\' would be unescaped by systemd: set by hand; '%' is doubled.
  process_report unit = big_process("glibc", {{"GLIBC_TUNABLES", hostile}}, "2.36");
  unit.unit = "fared.service";
  const advice refused =
      only(advise_process(unit, healthy_system()), "glibc_without_hugetlb_tunable");
  EXPECT_TRUE(refused.commands.empty());
  EXPECT_NE(refused.message.find("add glibc.malloc.hugetlb=1 to GLIBC_TUNABLES by hand"),
            std::string::npos)
      << refused.message;
  unit = big_process("glibc", {{"GLIBC_TUNABLES", "a=50%x y"}}, "2.36");
  unit.unit = "fared.service";
  EXPECT_NE(only(advise_process(unit, healthy_system()), "glibc_without_hugetlb_tunable")
                .commands.at(0)
                .find("'Environment=\"GLIBC_TUNABLES=a=50%%x y:glibc.malloc.hugetlb=1\"'"),
            std::string::npos);
  // Newlines, other control bytes, invalid UTF-8 and any non-ASCII character (one could reorder
  // what a terminal shows): no command at all, in either form.
  const std::string refused_values[] = {"a=1\nreboot", std::string("a=1\0b", 5), "a=\x1b[2J",
                                        "a=\xff",
                                        "a=\xe2\x80\xae"
                                        "1" /* U+202E, right-to-left override */};
  for (const std::string& value : refused_values) {
    for (const char* unit_name : {"", "fared.service"}) {
      process_report p = big_process("glibc", {{"GLIBC_TUNABLES", value}}, "2.36");
      p.unit = unit_name;
      const advice a = only(advise_process(p, healthy_system()), "glibc_without_hugetlb_tunable");
      EXPECT_TRUE(a.commands.empty()) << all_commands({a});
      EXPECT_NE(a.message.find("by hand"), std::string::npos) << a.message;
      EXPECT_EQ(a.level, advice_level::warning);
    }
  }
}

TEST(DoctorAdvice, DropInsNeverReplaceAFile) {
  // One file per variable: advice for MALLOC_CONF and for GLIBC_TUNABLES never share one.
  process_report jemalloc = big_process("jemalloc");
  process_report glibc = big_process("glibc", {}, "2.36");
  jemalloc.unit = glibc.unit = "fared.service";
  const std::string a =
      only(advise_process(jemalloc, healthy_system()), "jemalloc_without_thp").commands.at(0);
  const std::string b =
      only(advise_process(glibc, healthy_system()), "glibc_without_hugetlb_tunable").commands.at(0);
  const auto file = [](const std::string& command) {
    return command.substr(command.rfind(" > ") + 3);
  };
  EXPECT_EQ(file(a), "/etc/systemd/system/fared.service.d/zz-hugepage-doctor-MALLOC_CONF.conf)");
  EXPECT_NE(file(a), file(b));
}

TEST(DoctorAdvice, DevShmOptionPersistsInFstabKeepingItsOptions) {
  process_report p;
  p.pid = 9;
  p.shmem = p.dev_shm = p.rss = 2 * gib;
  system_report s = healthy_system();  // shmem_enabled never
  s.dev_shm_options = "rw,nosuid,nodev,size=65536k,huge=never,mode=1777";
  const std::string command = only(advise_process(p, s), "shmem_without_thp").commands.back();
  EXPECT_NE(command.find("'tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=65536k,huge=within_size,"
                         "mode=1777 0 0' >> /etc/fstab"),
            std::string::npos)
      << command;
  // Run against a scratch file instead of /etc/fstab: appended once, never to a file that has
  // a /dev/shm line already (commented lines do not count).
  char dir[] = "/tmp/doctor-fstab-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fstab = std::string(dir) + "/fstab";
  std::string local = command;
  for (std::size_t at; (at = local.find("/etc/fstab")) != std::string::npos;) {
    local.replace(at, 10, fstab);
  }
  const std::string commented = "# tmpfs /dev/shm tmpfs defaults 0 0\n";
  run_shell("printf '" + commented + "' > " + fstab);
  EXPECT_EQ(run_shell(local).first, 0);
  const std::string line =
      "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=65536k,huge=within_size,"
      "mode=1777 0 0\n";
  EXPECT_EQ(run_shell("cat " + fstab).second, commented + line);
  run_shell(local);
  EXPECT_EQ(run_shell("cat " + fstab).second, commented + line) << "appended twice";
  const std::string own = "tmpfs\t/dev/shm tmpfs size=1g 0 0\n";
  run_shell("printf '" + own + "' > " + fstab);
  run_shell(local + " 2>/dev/null");
  EXPECT_EQ(run_shell("cat " + fstab).second, "tmpfs\t/dev/shm tmpfs size=1g 0 0\n");
  run_shell("rm -r " + std::string(dir));
  // Options that are not plain text (unknown here): the flags systemd mounts it with.
  s.dev_shm_options = std::nullopt;
  EXPECT_NE(only(advise_process(p, s), "shmem_without_thp")
                .commands.back()
                .find("'tmpfs /dev/shm tmpfs rw,nosuid,nodev,huge=within_size 0 0'"),
            std::string::npos);
}

TEST(DoctorAdvice, NoCommandHoldsTheProcessTitle) {
  for (const char* allocator : {"jemalloc", "glibc", "mimalloc", "tcmalloc", "unknown"}) {
    process_report p = big_process(allocator);
    p.thp_enabled = false;
    const std::string commands =
        all_commands(advise_process(p, healthy_system())) +
        all_commands(advise_process(big_process(allocator), healthy_system()));
    EXPECT_EQ(commands.find("rm -rf"), std::string::npos) << commands;
    EXPECT_EQ(commands.find("reboot"), std::string::npos) << commands;
    EXPECT_EQ(commands.find('\x1b'), std::string::npos) << commands;
  }
}

TEST(DoctorAdvice, GlibcTunableOnlyWhereGlibcHasIt) {
  auto list = advise_process(big_process("glibc", {}, "2.36"), healthy_system());
  EXPECT_EQ(only(list, "glibc_without_hugetlb_tunable").commands,
            std::vector<std::string>{"export GLIBC_TUNABLES=glibc.malloc.hugetlb=1"});
  list = advise_process(big_process("glibc", {}, "2.31"), healthy_system());
  EXPECT_EQ(find(list, "glibc_without_hugetlb_tunable"), std::nullopt) << ids(list);
  EXPECT_EQ(only(list, "glibc_too_old_for_thp").level, advice_level::note);
  EXPECT_TRUE(only(list, "glibc_too_old_for_thp").commands.empty());
}

TEST(DoctorAdvice, MimallocNameForItsVersion) {
  // 2.0 reads only MIMALLOC_LARGE_OS_PAGES; 2.1 renamed it and reads both.
  auto list = advise_process(big_process("mimalloc", {}, "2.0"), healthy_system());
  EXPECT_EQ(only(list, "mimalloc_without_large_pages").commands,
            std::vector<std::string>{"export MIMALLOC_LARGE_OS_PAGES=1"});
  list = advise_process(big_process("mimalloc", {}, "2.1"), healthy_system());
  EXPECT_EQ(only(list, "mimalloc_without_large_pages").commands,
            std::vector<std::string>{"export MIMALLOC_ALLOW_LARGE_OS_PAGES=1"});
  // The 2.1 name set on a 2.0 library does nothing: still advised, with the 2.0 name.
  const process_report p = big_process("mimalloc", {{"MIMALLOC_ALLOW_LARGE_OS_PAGES", "1"}}, "2.0");
  EXPECT_FALSE(p.allocator.asks_for_huge);
  list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "mimalloc_without_large_pages").commands,
            std::vector<std::string>{"export MIMALLOC_LARGE_OS_PAGES=1"});
  EXPECT_TRUE(big_process("mimalloc", {{"MIMALLOC_ALLOW_LARGE_OS_PAGES", "1"}}, "2.1")
                  .allocator.asks_for_huge);
}

TEST(DoctorAdvice, TcmallocIsANoteWithoutAMachineWideCommand) {
  const auto list = advise_process(big_process("tcmalloc"), healthy_system());
  const advice& a = only(list, "tcmalloc_without_thp");
  EXPECT_EQ(a.level, advice_level::note);
  EXPECT_TRUE(a.commands.empty());
}

TEST(DoctorAdvice, AllocatorAsksButKernelDidNotDeliver) {
  process_report p = big_process("jemalloc", {{"MALLOC_CONF", "thp:always"}});
  p.thp_eligible_anon = 10 * gib;
  system_report s = healthy_system();
  // No fragmentation, no fallbacks: nothing to run (sparse memory, or not faulted yet).
  auto list = advise_process(p, s);
  EXPECT_EQ(find(list, "jemalloc_without_thp"), std::nullopt);
  EXPECT_EQ(find(list, "huge_pages_not_obtained"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("compact_memory"), std::string::npos);
  // Both: compaction, citing them.
  s.zones = std::vector<zone_readiness>{{0, "Normal", 3 * gib, 64 * mib, 32}};
  s.vmstat = {{"thp_fault_alloc", 1000}, {"thp_fault_fallback", 400}};
  list = advise_process(p, s);
  EXPECT_EQ(only(list, "huge_pages_not_obtained").commands,
            std::vector<std::string>{"echo 1 > /proc/sys/vm/compact_memory"});
}

TEST(DoctorAdvice, JvmHeapIsNotBlamedOnGlibc) {
  process_report p = big_process("glibc", {}, "2.36");
  p.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                             std::string("java\0-Xmx12g\0Main", 17), {});
  ASSERT_EQ(p.runtime.kind, "jvm");
  EXPECT_EQ(p.runtime.version, "17");
  system_report s = healthy_system();
  s.zones = std::vector<zone_readiness>{{0, "Normal", 3 * gib, 64 * mib, 32}};
  auto list = advise_process(p, s);
  EXPECT_EQ(find(list, "glibc_without_hugetlb_tunable"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("compact_memory"), std::string::npos);
  EXPECT_EQ(all_commands(list).find("GLIBC_TUNABLES"), std::string::npos);
  EXPECT_EQ(only(list, "jvm_without_thp").commands,
            std::vector<std::string>{"export JAVA_TOOL_OPTIONS=-XX:+UseTransparentHugePages"});
  // The flag in JAVA_TOOL_OPTIONS: the JVM asks; no advice to add it.
  p.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                             std::string("java\0Main", 9),
                             {{"JAVA_TOOL_OPTIONS", "-Xmx1g -XX:+UseTransparentHugePages"}});
  EXPECT_TRUE(p.runtime.asks_for_huge);
  EXPECT_EQ(find(advise_process(p, healthy_system()), "jvm_without_thp"), std::nullopt);
  // A later -XX:- on the command line wins.
  p.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                             std::string("java\0-XX:-UseTransparentHugePages\0Main", 39),
                             {{"JAVA_TOOL_OPTIONS", "-XX:+UseTransparentHugePages"}});
  EXPECT_FALSE(p.runtime.asks_for_huge);
}

TEST(DoctorAdvice, RedisChoiceIsANote) {
  process_report p = big_process("jemalloc");
  p.thp_enabled = false;
  p.runtime = detect_runtime({"/usr/bin/redis-check-rdb"}, "", {});
  ASSERT_EQ(p.runtime.kind, "redis");
  p.allocator = describe_allocator({"jemalloc", "", ""}, true, {}, true);
  const auto list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "redis_disables_thp").level, advice_level::note);
  EXPECT_EQ(find(list, "process_thp_disabled"), std::nullopt) << ids(list);
  EXPECT_FALSE(has_warning(list)) << ids(list);
}

TEST(DoctorAdvice, OverwrittenEnvironmentIsUnknownNotNone) {
  process_report p = big_process("jemalloc");
  p.allocator = describe_allocator({"jemalloc", "/usr/lib/libjemalloc.so.2", ""}, true, {}, true);
  EXPECT_NE(p.allocator.hugepage_mode.find("unknown"), std::string::npos);
  const auto list = advise_process(p, healthy_system());
  EXPECT_EQ(find(list, "jemalloc_without_thp"), std::nullopt) << ids(list);
  EXPECT_EQ(only(list, "allocator_settings_unknown").level, advice_level::note);
}

TEST(DoctorAdvice, PostgresSharedBuffersNeedAPool) {
  process_report p;
  p.pid = 77;
  p.name = "postgres";
  p.shmem = 14 * mib;  // barely touched yet: the mapping's size counts
  p.largest_shared = 148 * mib;
  p.rss = 30 * mib;
  p.largest.push_back(
      {0x7f0000000000, 148 * mib, 140 * mib, 0, 4096, "/dev/zero (deleted)", "", true, {}, 1});
  p.runtime = detect_runtime({"/usr/lib/postgresql/15/bin/postgres"}, "", {});
  ASSERT_EQ(p.runtime.kind, "postgres");
  EXPECT_EQ(p.runtime.version, "15");
  system_report s = healthy_system();
  s.pools[0].total = 10;
  s.pools[0].free = 10;
  const auto list = advise_process(p, s);
  const advice& a = only(list, "postgres_huge_pages");
  EXPECT_NE(a.message.find("huge_pages = on"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("at least 74 pages of 2 MiB"), std::string::npos) << a.message;
  EXPECT_EQ(a.commands.at(0), "echo 74 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
  // Already on the pool: nothing.
  p.hugetlb[2 * mib] = 148 * mib;
  EXPECT_EQ(find(advise_process(p, s), "postgres_huge_pages"), std::nullopt);
}

TEST(DoctorAdvice, FractionsStayInTheirClass) {
  // tmpfs huge=always: shmem THP must not land in the anonymous numerator.
  std::vector<mapping_info> maps(2);
  maps[0].start = 0x1000000;
  maps[0].end = 0x1000000 + 64 * mib;
  maps[0].permissions = "rw-s";
  maps[0].name = "/dev/shm/big";
  maps[0].rss = 64 * mib;
  maps[0].shmem_huge = 64 * mib;
  maps[0].kernel_page_bytes = 4096;
  maps[1].start = 0x9000000;
  maps[1].end = 0x9000000 + 4096;
  maps[1].permissions = "rw-p";
  maps[1].rss = 4096;
  maps[1].anonymous = 4096;
  maps[1].kernel_page_bytes = 4096;
  const process_report p = summarize_mappings(maps, 10);
  EXPECT_EQ(p.thp, 0u);
  EXPECT_EQ(p.shmem, 64 * mib);
  EXPECT_EQ(p.shmem_huge, 64 * mib);
  EXPECT_DOUBLE_EQ(p.huge_fraction(), 0.0);
  EXPECT_DOUBLE_EQ(p.shmem_huge_fraction(), 1.0);
  EXPECT_LE(process_report::share(5, 3), 1.0);
  ASSERT_EQ(p.largest.size(), 2u);
  EXPECT_TRUE(p.largest[0].shared);
}

TEST(DoctorAdvice, SharedMemoryFollowsShmemEnabled) {
  process_report p;
  p.pid = 9;
  p.shmem = 2 * gib;
  p.dev_shm = 2 * gib;
  p.rss = 2 * gib;
  system_report s = healthy_system();  // shmem_enabled never
  auto list = advise_process(p, s);
  const advice a = only(list, "shmem_without_thp");
  EXPECT_EQ(a.commands.at(0), "echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled");
  ASSERT_EQ(a.commands.size(), 4u);  // the last one: the fstab line (DevShmOptionPersists...)
  EXPECT_EQ(a.commands.at(2), "mount -o remount,huge=within_size /dev/shm");
  s.thp.shmem_enabled = "advise";
  EXPECT_EQ(find(advise_process(p, s), "shmem_without_thp"), std::nullopt);
  s.thp.shmem_enabled = "never";
  p.shmem_huge = 2 * gib;  // already huge (tmpfs huge=always)
  EXPECT_EQ(find(advise_process(p, s), "shmem_without_thp"), std::nullopt);
}

TEST(DoctorAdvice, ProcessDisabledThpOrSystemNever) {
  process_report p = big_process("glibc");
  p.thp_enabled = false;
  const auto list = advise_process(p, healthy_system());
  EXPECT_TRUE(only(list, "process_thp_disabled").commands.empty());
  system_report never = healthy_system();
  never.thp.enabled = "never";
  ASSERT_NE(find(advise_process(big_process("glibc"), never), "thp_never"), std::nullopt);
}

TEST(DoctorAdvice, SmallOrWellCoveredProcessGetsNone) {
  process_report small = big_process("jemalloc");
  small.anonymous = 100 * mib;
  small.rss = 100 * mib;
  EXPECT_TRUE(advise_process(small, healthy_system()).empty());
  process_report covered = big_process("glibc");
  covered.thp = 10 * gib;
  EXPECT_TRUE(advise_process(covered, healthy_system()).empty());
}

TEST(DoctorAdvice, ProcessOnAPoolInUseOrShort) {
  process_report p = big_process("glibc");
  p.anonymous = 64 * mib;
  p.hugetlb[2 * mib] = 1200 * mib;
  system_report s = healthy_system();
  s.pools[0].free = 0;
  EXPECT_EQ(find(advise_process(p, s), "pool_exhausted"), std::nullopt);  // exactly used
  s.pools[0].overcommit = 4;
  s.pools[0].surplus = 4;
  const auto list = advise_process(p, s);
  const advice& a = only(list, "pool_exhausted");
  EXPECT_NE(a.message.find("holds 1.17 GiB"), std::string::npos) << a.message;
}

}  // namespace
}  // namespace hugepage::doctor
