// tools/test/doctor_parse_test.cpp - the doctor's parsers against stored samples of several
// kernel versions (tools/test/data), and its readers against a fake /proc and /sys tree.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "advise_system.hpp"
#include "allocator_detect.hpp"
#include "allocator_settings.hpp"
#include "cgroup_membership.hpp"
#include "collect_system.hpp"
#include "doctor_samples.hpp"
#include "format.hpp"
#include "hugepage/cgroup.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/kernel_memory.hpp"
#include "hugepage/smaps.hpp"
#include "hugetlb_cgroup.hpp"
#include "mapping_summary.hpp"
#include "numa_files.hpp"
#include "process_environ.hpp"
#include "process_report.hpp"
#include "render_json.hpp"
#include "render_table.hpp"
#include "status_fields.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {
namespace {

using hugepage::units::kib;
using hugepage::units::mib;

// ---- smaps (the library's parser, the doctor's summary) ----------------------------------------

TEST(DoctorSmaps, Kernel419CountsThpHugetlbAndBase) {
  const process_report p = summarize_mappings(parse_smaps(sample("smaps_4.19.txt")), 10);
  EXPECT_EQ(p.mappings, 5u);
  EXPECT_EQ(p.rss, (120 + 2500 + 524288 + 0 + 16) * kib);
  EXPECT_EQ(p.anonymous, (2500 + 524288 + 16) * kib);
  EXPECT_EQ(p.thp, 516096 * kib);
  ASSERT_EQ(p.hugetlb.size(), 1u);
  EXPECT_EQ(p.hugetlb.at(2 * mib), 32 * mib);
  EXPECT_EQ(p.base, p.rss - p.thp);
  EXPECT_EQ(p.thp_advised, 512 * mib);
  // Largest anonymous first: the THP arena, then the hugetlb mapping, heap, stack.
  ASSERT_EQ(p.largest.size(), 4u);  // [stack] is anonymous too
  EXPECT_EQ(p.largest[0].size, 512 * mib);
  EXPECT_EQ(p.largest[0].flags, "hg");
  EXPECT_EQ(p.largest[1].name, "/anon_hugepage (deleted)");
  EXPECT_EQ(p.largest[1].huge, 32 * mib);
  EXPECT_EQ(p.largest[1].kernel_page_bytes, 2 * mib);
  EXPECT_EQ(p.largest[2].name, "[heap]");
}

TEST(DoctorSmaps, Kernel68SeparatesHugetlbSizesAndSkipsUnknownFields) {
  const process_report p = summarize_mappings(parse_smaps(sample("smaps_6.8.txt")), 2);
  EXPECT_EQ(p.mappings, 5u);
  EXPECT_EQ(p.thp, 8 * mib);
  ASSERT_EQ(p.hugetlb.size(), 2u);
  EXPECT_EQ(p.hugetlb.at(2 * mib), 4 * mib);                  // shared, from hugetlbfs
  EXPECT_EQ(p.hugetlb.at(hugepage::units::gib), 1024 * mib);  // private 1 GiB pages
  EXPECT_EQ(p.anonymous, (4194304 + 512) * kib);
  ASSERT_EQ(p.largest.size(), 2u);  // --top 2
  EXPECT_EQ(p.largest[0].name, "[anon:fare cache]");
  EXPECT_EQ(p.largest[1].kernel_page_bytes, hugepage::units::gib);
  EXPECT_NEAR(p.huge_fraction(), (8.0 + 1024 + 4) / (4096.0 + 0.5 + 1024 + 4), 1e-9);
}

TEST(DoctorSmaps, Kernel310WithoutHugetlbFieldsAndAGarbageLine) {
  const process_report p = summarize_mappings(parse_smaps(sample("smaps_3.10.txt")), 10);
  EXPECT_EQ(p.mappings, 3u);
  EXPECT_EQ(p.thp, 1046528 * kib);
  EXPECT_TRUE(p.hugetlb.empty());
  EXPECT_EQ(p.rss, (40 + 1048576 + 12) * kib);
}

// ---- buddyinfo ---------------------------------------------------------------------------------

TEST(DoctorBuddyinfo, Kernel44ElevenOrders) {
  const auto zones = parse_buddyinfo(sample("buddyinfo_4.4.txt"));
  ASSERT_EQ(zones.size(), 3u);
  EXPECT_EQ(zones[2].zone, "Normal");
  ASSERT_EQ(zones[2].free_blocks.size(), 11u);
  // Order 9 (2 MiB) and 10 (4 MiB): 4 * 2 MiB + 100 * 4 MiB.
  EXPECT_EQ(zones[2].free_bytes_from(9, 4096), 4 * 2 * mib + 100 * 4 * mib);
  EXPECT_EQ(zones[2].blocks_of(9), 4u + 200u);
  EXPECT_EQ(zones[0].free_bytes(4096),
            (1 + 2 + 4 + 0 + 32 + 32 + 64 + 0 + 256 + 512 + 3 * 1024) * 4 * kib);
}

TEST(DoctorBuddyinfo, Kernel68TwoNodesAndMovable) {
  const auto zones = parse_buddyinfo(sample("buddyinfo_6.8_numa.txt"));
  ASSERT_EQ(zones.size(), 5u);
  EXPECT_EQ(zones[3].node, 1);
  EXPECT_EQ(zones[4].zone, "Movable");
  EXPECT_EQ(zones[4].free_bytes(4096), 0u);
  EXPECT_EQ(zones[3].blocks_of(9), 4u + 2 * 3990u);
}

TEST(DoctorBuddyinfo, MoreOrdersAndMalformedLines) {
  // An arch with 13 orders, then lines that must be skipped, not half-parsed.
  const auto zones = parse_buddyinfo(sample("buddyinfo_odd.txt"));
  ASSERT_EQ(zones.size(), 1u);
  ASSERT_EQ(zones[0].free_blocks.size(), 13u);
  EXPECT_EQ(zones[0].blocks_of(9), 1u + 1 * 2u + 2 * 4u + 4 * 8u);
  EXPECT_TRUE(parse_buddyinfo("").empty());
}

// ---- vmstat, meminfo ---------------------------------------------------------------------------

TEST(DoctorVmstat, Kernel49WithoutFallbackCharge) {
  const auto v = parse_vmstat(sample("vmstat_4.9.txt"));
  EXPECT_EQ(v.at("thp_fault_alloc"), 120432u);
  EXPECT_EQ(v.at("thp_fault_fallback"), 40210u);
  EXPECT_EQ(v.count("thp_fault_fallback_charge"), 0u);
  EXPECT_EQ(v.at("compact_stall"), 4021u);
}

TEST(DoctorVmstat, Kernel515And68WithUnknownAndBrokenLines) {
  const auto v5 = parse_vmstat(sample("vmstat_5.15.txt"));
  EXPECT_EQ(v5.at("thp_fault_fallback_charge"), 0u);
  EXPECT_EQ(v5.at("htlb_buddy_alloc_fail"), 3u);
  const auto v6 = parse_vmstat(sample("vmstat_6.8.txt"));
  EXPECT_EQ(v6.at("thp_fault_alloc"), 11096u);
  EXPECT_EQ(v6.at("future_counter_from_2030"), 77u);
  EXPECT_EQ(v6.count("not_a_number"), 0u);
  EXPECT_EQ(v6.count("lonely_name"), 0u);
}

TEST(DoctorMeminfo, Kernel310WithoutMemAvailableOrHugetlb) {
  const auto m = parse_meminfo(sample("meminfo_3.10.txt"));
  EXPECT_EQ(m.at("MemTotal"), 65768012 * kib);
  EXPECT_EQ(m.at("AnonHugePages"), 28311552 * kib);
  EXPECT_EQ(m.at("HugePages_Total"), 0u);  // a count, not kB
  EXPECT_EQ(m.count("MemAvailable"), 0u);
  EXPECT_EQ(m.count("Hugetlb"), 0u);
}

TEST(DoctorMeminfo, Kernel68WithNewFieldsAndUnknownUnits) {
  const auto m = parse_meminfo(sample("meminfo_6.8.txt"));
  EXPECT_EQ(m.at("HugePages_Total"), 600u);
  EXPECT_EQ(m.at("Hugetlb"), 3325952 * kib);
  EXPECT_EQ(m.at("Unaccepted"), 0u);
  EXPECT_EQ(m.count("SomethingNew"), 0u);  // "MB" is not a unit meminfo uses: skipped
  EXPECT_EQ(m.at("DirectMap1G"), 23068672 * kib);
}

TEST(DoctorStatus, ThpEnabledAndName) {
  const std::string status =
      "Name:\tfared\nUmask:\t0022\nUid:\t0\t0\t0\t0\nVmRSS:\t  102400 kB\nTHP_enabled:\t0\n";
  EXPECT_EQ(status_text_field(status, "Name").value_or(""), "fared");
  const auto fields = parse_meminfo(status);
  EXPECT_EQ(fields.at("THP_enabled"), 0u);
  EXPECT_EQ(fields.at("VmRSS"), 102400 * kib);
  EXPECT_EQ(fields.count("Uid"), 0u);
}

// ---- allocator ---------------------------------------------------------------------------------

TEST(DoctorAllocator, DetectsJemallocOverGlibc) {
  const auto paths = parse_maps_paths(sample("maps_jemalloc.txt"));
  EXPECT_EQ(paths.size(), 3u);  // each path once, no [stack] or anonymous
  const allocator_guess guess = detect_allocator(paths);
  EXPECT_EQ(guess.name, "jemalloc");
  EXPECT_EQ(guess.library, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
}

TEST(DoctorAllocator, DetectsOldGlibcTcmallocMimalloc) {
  EXPECT_EQ(detect_allocator(parse_maps_paths(sample("maps_old_glibc.txt"))).name, "glibc");
  EXPECT_EQ(detect_allocator({"/usr/lib/libc.so.6", "/usr/lib/libtcmalloc_minimal.so.4"}).name,
            "tcmalloc");
  EXPECT_EQ(detect_allocator({"/opt/lib/libmimalloc.so.2.1"}).name, "mimalloc");
  EXPECT_EQ(detect_allocator({"/bin/static-binary"}).name, "unknown");
  // musl: its libc is the loader, as Alpine names it or as Debian's loader name resolves.
  EXPECT_EQ(detect_allocator({"/usr/bin/prog", "/lib/ld-musl-x86_64.so.1"}).name, "musl");
  EXPECT_EQ(detect_allocator({"/usr/lib/x86_64-linux-musl/libc.so"}).name, "musl");
  EXPECT_EQ(detect_allocator({"/usr/lib/x86_64-linux-musl/libc.so"}).library,
            "/usr/lib/x86_64-linux-musl/libc.so");
  EXPECT_EQ(detect_allocator({"/opt/app/libc.so"}).name, "unknown");  // a libc.so, not musl's
}

TEST(DoctorAllocator, EnvironKeepsOnlyAllocatorVariables) {
  static constexpr char text[] =
      "PATH=/usr/bin\0MALLOC_CONF=thp:always,narenas:4\0HOME=/root\0"
      "GLIBC_TUNABLES=glibc.malloc.hugetlb=1\0MIMALLOC_ALLOW_LARGE_OS_PAGES=1\0=odd\0NOEQUALS\0"
      "TCMALLOC_RELEASE_RATE=0";
  const std::string environ(text, sizeof text - 1);
  const auto vars = parse_allocator_environ(environ);
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[0].first, "MALLOC_CONF");
  EXPECT_EQ(vars[0].second, "thp:always,narenas:4");
  EXPECT_EQ(vars[1].first, "GLIBC_TUNABLES");
  EXPECT_EQ(vars[2].first, "MIMALLOC_ALLOW_LARGE_OS_PAGES");
  EXPECT_EQ(vars[3].second, "0");
}

TEST(DoctorAllocator, GlibcTunablesArePutBackFromTheFragmentsGlibcLeaves) {
  // The bytes /proc/PID/environ holds on glibc 2.36 for
  // GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=1
  // (glibc wrote a NUL over each ':' after a tunable it knows).
  static constexpr char text[] =
      "A=1\0GLIBC_TUNABLES=glibc.malloc.arena_max=2\0glibc.malloc.hugetlb=1\0"
      "glibc.malloc.trim_threshold=1\0B=2\0MALLOC_CONF=thp:always\0";
  const auto vars = parse_allocator_environ(std::string(text, sizeof text - 1));
  ASSERT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars[0].first, "GLIBC_TUNABLES");
  EXPECT_EQ(vars[0].second,
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=1");
  EXPECT_EQ(vars[1].first, "MALLOC_CONF");
  // hugetlb=1 in second place reads as set; the last entry for a tunable wins, as in glibc.
  const auto a = describe_allocator({"glibc", "/lib/libc.so.6", "2.36"}, true, vars);
  EXPECT_TRUE(a.asks_for_huge);
  EXPECT_EQ(a.hugepage_mode, "glibc.malloc.hugetlb=1 (THP madvise)");
  const auto later =
      describe_allocator({"glibc", "/lib/libc.so.6", "2.36"}, true,
                         {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1:glibc.malloc.hugetlb=0"}});
  EXPECT_FALSE(later.asks_for_huge);
  const auto ten = describe_allocator({"glibc", "/lib/libc.so.6", "2.36"}, true,
                                      {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=10"}});
  EXPECT_FALSE(ten.asks_for_huge);
  // An unknown entry keeps its ':' and one without '=' stands alone (glibc 2.36, from
  // GLIBC_TUNABLES=glibc.malloc.arena_max=2:foo=3:glibc.malloc.hugetlb=1:bar): all put back,
  // and the entry without '=' is no process title.
  static constexpr char odd[] =
      "A=1\0GLIBC_TUNABLES=glibc.malloc.arena_max=2\0foo=3:glibc.malloc.hugetlb=1\0bar\0B=2\0";
  const std::string odd_text(odd, sizeof odd - 1);
  EXPECT_FALSE(environ_overwritten(odd_text));
  const auto odd_vars = parse_allocator_environ(odd_text);
  ASSERT_EQ(odd_vars.size(), 1u);
  EXPECT_EQ(odd_vars[0].second, "glibc.malloc.arena_max=2:foo=3:glibc.malloc.hugetlb=1:bar");
  // A variable after GLIBC_TUNABLES is no fragment; a title without '=' elsewhere still is one.
  static constexpr char path[] = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1\0PATH=/usr/bin:/bin\0";
  EXPECT_EQ(parse_allocator_environ(std::string(path, sizeof path - 1)).at(0).second,
            "glibc.malloc.hugetlb=1");
  EXPECT_TRUE(environ_overwritten(std::string("redis-server *:6379\0\0\0", 22)));
}

TEST(DoctorAllocator, SettingsSayWhetherItAsksForHugePages) {
  const auto je = describe_allocator({"jemalloc", "/lib/libjemalloc.so.2", ""}, true,
                                     {{"MALLOC_CONF", "narenas:4,thp:always"}});
  EXPECT_TRUE(je.asks_for_huge);
  EXPECT_EQ(je.hugepage_mode, "thp:always");
  const auto je_default = describe_allocator({"jemalloc", "x", ""}, true, {});
  EXPECT_FALSE(je_default.asks_for_huge);
  EXPECT_EQ(je_default.hugepage_mode, "thp:default");
  const auto glibc =
      describe_allocator({"glibc", "x", ""}, true, {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}});
  EXPECT_TRUE(glibc.asks_for_huge);
  const auto mi =
      describe_allocator({"mimalloc", "x", ""}, true, {{"MIMALLOC_LARGE_OS_PAGES", "0"}});
  EXPECT_FALSE(mi.asks_for_huge);
  const auto unreadable = describe_allocator({"glibc", "x", ""}, false, {});
  EXPECT_FALSE(unreadable.asks_for_huge);
  EXPECT_NE(unreadable.hugepage_mode.find("unreadable"), std::string::npos);
}

// ---- cgroups and a fake tree -------------------------------------------------------------------

// A temporary directory tree, removed at the end of the test.
class fake_tree {
 public:
  fake_tree() {
    char name[] = "/tmp/hugepage-doctor-test-XXXXXX";
    const char* made = ::mkdtemp(name);
    EXPECT_NE(made, nullptr);
    root_ = made == nullptr ? "" : made;
  }
  ~fake_tree() {
    if (!root_.empty()) std::system(("rm -rf '" + root_ + "'").c_str());
  }
  fake_tree(const fake_tree&) = delete;
  fake_tree& operator=(const fake_tree&) = delete;

  void write(const std::string& path, const std::string& text) const {
    std::string dir = root_;
    std::size_t at = 1;
    while ((at = path.find('/', at)) != std::string::npos) {
      ::mkdir((root_ + path.substr(0, at)).c_str(), 0755);
      ++at;
    }
    std::ofstream(root_ + path) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(DoctorCgroup, ParsesV1AndV2Lines) {
  const auto hybrid = parse_cgroup_file("12:hugetlb:/batch\n4:memory:/x\n0::/user.slice/a\n");
  EXPECT_EQ(hybrid.hugetlb.value_or(""), "/batch");
  EXPECT_EQ(hybrid.unified.value_or(""), "/user.slice/a");
  const auto combined = parse_cgroup_file("3:cpu,hugetlb,pids:/svc\n");
  EXPECT_EQ(combined.hugetlb.value_or(""), "/svc");
  EXPECT_FALSE(combined.unified);
  EXPECT_FALSE(parse_cgroup_file("garbage\n1:x\n").hugetlb);
}

TEST(DoctorCgroup, LimitValues) {
  ASSERT_TRUE(hugepage::parse_cgroup_limit("max\n"));
  EXPECT_FALSE(*hugepage::parse_cgroup_limit("max\n"));  // no limit
  EXPECT_EQ(*hugepage::parse_cgroup_limit("1073741824\n"),
            std::optional<std::uint64_t>(1073741824));
  EXPECT_FALSE(*hugepage::parse_cgroup_limit("9223372036854771712\n"));  // v1 "unlimited"
  EXPECT_FALSE(hugepage::parse_cgroup_limit("lots"));
  EXPECT_EQ(hugetlb_cgroup_size_name(2 * mib), "2MB");
  EXPECT_EQ(hugetlb_cgroup_size_name(hugepage::units::gib), "1GB");
  EXPECT_EQ(hugetlb_cgroup_size_name(64 * kib), "64KB");
}

// Where a captured tree mounts cgroup2: the hierarchy is found from mountinfo, as the library
// finds it.
constexpr const char* v2_mountinfo =
    "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(DoctorCgroup, ReadsV2LimitsAndAnAncestorsLimit) {
  fake_tree tree;
  tree.write("/proc/self/mountinfo", v2_mountinfo);
  tree.write("/sys/fs/cgroup/cgroup.controllers", "cpu io memory hugetlb pids\n");
  const std::string svc = "/sys/fs/cgroup/app.slice/fared.service/";
  tree.write(svc + "hugetlb.2MB.max", "max\n");
  tree.write(svc + "hugetlb.2MB.rsvd.max", "max\n");
  tree.write(svc + "hugetlb.2MB.current", "16777216\n");
  tree.write("/sys/fs/cgroup/app.slice/hugetlb.2MB.max", "536870912\n");
  tree.write("/sys/fs/cgroup/app.slice/hugetlb.2MB.rsvd.max", "max\n");
  tree.write("/sys/fs/cgroup/app.slice/hugetlb.2MB.events", "max 3\n");
  const cgroup_report r =
      hugetlb_cgroup_report(tree.root(), "0::/app.slice/fared.service\n", {2 * mib, 1024 * mib});
  EXPECT_EQ(r.status, "v2");
  ASSERT_EQ(r.limits.size(), 2u);
  EXPECT_TRUE(r.limits[0].has_max);
  EXPECT_FALSE(r.limits[0].max);  // "max": no limit
  EXPECT_EQ(r.limits[0].current.value_or(0), 16 * mib);
  EXPECT_EQ(r.limits[1].max.value_or(0), 512 * mib);  // the slice's limit
  EXPECT_NE(r.limits[1].directory.find("app.slice"), std::string::npos);
  EXPECT_EQ(r.limits[1].refused, std::optional<std::uint64_t>(3));  // events "max 3"
  EXPECT_FALSE(r.limits[0].refused.has_value());
}

TEST(DoctorCgroup, ReadsV1Limits) {
  fake_tree tree;
  tree.write("/proc/self/mountinfo",
             "25 1 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
             "31 25 0:27 / /sys/fs/cgroup/hugetlb rw,nosuid - cgroup cgroup rw,hugetlb\n");
  tree.write("/sys/fs/cgroup/hugetlb/batch/hugetlb.2MB.limit_in_bytes", "9223372036854771712\n");
  tree.write("/sys/fs/cgroup/hugetlb/batch/hugetlb.1GB.limit_in_bytes", "2147483648\n");
  tree.write("/sys/fs/cgroup/hugetlb/batch/hugetlb.1GB.failcnt", "7\n");
  const cgroup_report r =
      hugetlb_cgroup_report(tree.root(), "5:hugetlb:/batch\n", {2 * mib, 1024 * mib});
  EXPECT_EQ(r.status, "v1");
  ASSERT_EQ(r.limits.size(), 2u);
  EXPECT_FALSE(r.limits[0].max);
  EXPECT_FALSE(r.limits[0].has_rsvd_max);  // kernel before 5.7
  EXPECT_EQ(r.limits[1].max.value_or(0), 2048 * mib);
  EXPECT_EQ(r.limits[1].refused.value_or(0), 7u);  // failcnt
}

TEST(DoctorCgroup, NoControllerSaysSo) {
  fake_tree tree;
  tree.write("/proc/self/mountinfo", v2_mountinfo);
  tree.write("/sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  const cgroup_report r = hugetlb_cgroup_report(tree.root(), "0::/x\n", {2 * mib});
  EXPECT_TRUE(r.limits.empty());
  EXPECT_NE(r.status.find("no hugetlb"), std::string::npos);
}

TEST(DoctorFakeTree, MissingFilesAreUnknownNotZero) {
  // A kernel (or container) without buddyinfo, vmstat, meminfo, cgroup files or NUMA nodes.
  fake_tree tree;
  tree.write("/proc/version", "Linux\n");
  const system_report s = collect_system(tree.root(), /*probe_collapse=*/false);
  EXPECT_FALSE(s.zones);
  EXPECT_FALSE(s.vmstat_readable);
  EXPECT_FALSE(s.meminfo_readable);
  EXPECT_TRUE(s.node_pools.empty());
  EXPECT_TRUE(s.cgroup.limits.empty());
  EXPECT_FALSE(s.cgroup.status.empty());
  const std::string table = render_system(s, advise_system(s));
  EXPECT_NE(table.find("unknown: /proc/buddyinfo unreadable"), std::string::npos);
  EXPECT_NE(table.find("unknown: /proc/vmstat unreadable"), std::string::npos);
  const std::string json = json_system(s, {});
  EXPECT_NE(json.find("\"readiness\": null"), std::string::npos);
  EXPECT_NE(json.find("\"vmstat\": null"), std::string::npos);
  EXPECT_NE(json.find("\"memory\": null"), std::string::npos);
}

TEST(DoctorFakeTree, SamplesThroughTheReaders) {
  fake_tree tree;
  tree.write("/proc/buddyinfo", sample("buddyinfo_6.8_numa.txt"));
  tree.write("/proc/vmstat", sample("vmstat_4.9.txt"));
  tree.write("/proc/meminfo", sample("meminfo_3.10.txt"));
  tree.write("/sys/devices/system/node/node0/online", "1\n");
  tree.write("/sys/devices/system/node/node1/online", "1\n");
  tree.write("/sys/devices/system/node/possible", "0-1\n");
  EXPECT_EQ(numa_nodes(tree.root()), (std::vector<int>{0, 1}));
  const system_report s = collect_system(tree.root(), false);
  ASSERT_TRUE(s.zones);
  EXPECT_EQ(s.zones->size(), 5u);
  EXPECT_EQ(s.vmstat.at("thp_fault_fallback"), 40210u);
  EXPECT_EQ(s.vmstat.count("thp_fault_fallback_charge"), 0u);
  const std::string json = json_system(s, {});
  EXPECT_NE(json.find("\"thp_fault_fallback_charge\": null"), std::string::npos);
  EXPECT_NE(json.find("\"mem_available_bytes\": null"), std::string::npos);
}

// The system report under a root reads the tree's THP, pools, kernel release and mounts through
// the library's readers, not the live machine's.
TEST(DoctorFakeTree, SystemFilesThroughTheLibraryReaders) {
  fake_tree tree;
  const std::string thp = "/sys/kernel/mm/transparent_hugepage/";
  tree.write("/proc/sys/kernel/osrelease", "6.8.0-captured\n");
  tree.write(thp + "enabled", "always [madvise] never\n");
  tree.write(thp + "hpage_pmd_size", "2097152\n");
  tree.write(thp + "hugepages-2048kB/enabled", "always inherit madvise [never]\n");
  tree.write(thp + "hugepages-64kB/enabled", "always inherit [madvise] never\n");
  tree.write("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "12\n");
  tree.write("/proc/self/mountinfo",
             "25 24 0:23 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=65536k,huge=advise\n");
  const system_report s = collect_system(tree.root(), false);
  EXPECT_EQ(s.kernel_release, "6.8.0-captured");
  EXPECT_EQ(s.thp.enabled.value_or(""), "madvise");
  EXPECT_EQ(s.thp.pmd_mode, std::optional<thp_mode>(thp_mode::never));  // the per-size switch
  ASSERT_EQ(s.pools.size(), 1u);
  EXPECT_EQ(s.pools[0].total, std::optional<std::uint64_t>(12));
  ASSERT_EQ(s.mthp.size(), 2u);
  EXPECT_EQ(s.mthp[0].page_bytes, 64 * kib);
  EXPECT_EQ(s.mthp[1].enabled, "never");
  EXPECT_EQ(s.dev_shm_options.value_or(""), "rw,nosuid,nodev,size=65536k,huge=advise");
  // A later mount over /dev/shm that is not tmpfs hides it.
  tree.write("/proc/self/mountinfo",
             "25 24 0:23 / /dev/shm rw - tmpfs tmpfs rw\n26 25 0:24 / /dev/shm rw - ramfs r rw\n");
  EXPECT_FALSE(collect_system(tree.root(), false).dev_shm_options);
  tree.write("/proc/self/mountinfo", "25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw\n");
  EXPECT_EQ(collect_system(tree.root(), false).dev_shm_options.value_or(""), "rw,relatime");
}

TEST(DoctorFormat, Bytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(2 * mib), "2 MiB");
  EXPECT_EQ(format_bytes(std::uint64_t{1} << 30), "1 GiB");
  EXPECT_EQ(format_bytes(68640 * kib), "67.0 MiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
}

TEST(DoctorNuma, NumaMapsPerNode) {
  const auto nodes = parse_numa_maps(
      "55fb1c9f4000 default file=/usr/bin/x mapped=205 N0=205 kernelpagesize_kB=4\n"
      "7fe5d0000000 bind:1 file=/anon_hugepage\\040(deleted) huge dirty=8 N1=8 "
      "kernelpagesize_kB=2048\n"
      "7f0000000000 interleave:0-1 anon=10 dirty=10 N0=4 N1=6 kernelpagesize_kB=4\n"
      "garbage line N=x Nfoo=3\n");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes.at(0).bytes, (205u + 4u) * 4096);
  EXPECT_EQ(nodes.at(0).hugetlb_bytes, 0u);
  EXPECT_EQ(nodes.at(1).bytes, 8u * 2048 * 1024 + 6u * 4096);
  EXPECT_EQ(nodes.at(1).hugetlb_bytes, 8u * 2048 * 1024);
  // A capture from PostgreSQL 15 with huge_pages=on: its hugetlb pages on node 0.
  const auto pg = parse_numa_maps(sample("services/postgres-huge-pages-on/numa_maps"));
  ASSERT_EQ(pg.size(), 1u);
  EXPECT_GT(pg.at(0).hugetlb_bytes, 0u);
}

}  // namespace
}  // namespace hugepage::doctor
