// The parsers of kernel files over captured and hostile text, and their readers over a tree under
// a root directory (kernel_files.hpp, kernel_counters.hpp, kernel_memory.hpp, and the cgroup and
// THP readers that follow their shape).
#include "hugepage/kernel_files.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "hugepage/cgroup.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_memory.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/system.hpp"

namespace {

using hugepage::mount_info;

using hugepage::units::mib;

// A directory tree in /tmp, removed at the end: files written at paths below it.
class tree {
 public:
  tree() {
    char dir[] = "/tmp/hugepage_kernel_files_XXXXXX";
    if (::mkdtemp(dir) != nullptr) root_ = dir;
  }
  ~tree() {
    if (!root_.empty()) std::system(("rm -rf '" + root_ + "'").c_str());
  }
  tree(const tree&) = delete;
  tree& operator=(const tree&) = delete;

  void write(const std::string& path, const std::string& text) const {
    for (std::size_t at = 1; (at = path.find('/', at)) != std::string::npos; ++at) {
      ::mkdir((root_ + path.substr(0, at)).c_str(), 0755);
    }
    std::ofstream(root_ + path) << text;
  }
  void mkdir(const std::string& path) const { write(path + "/x", ""); }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

// ---- mountinfo ---------------------------------------------------------------------------------

TEST(MountInfo, ParsesEveryFieldWithOptionalFields) {
  const auto mounts = hugepage::parse_mountinfo(
      "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue\n"
      "25 24 0:23 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw,size=65536k,huge=within_size\n");
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].device, "98:0");
  EXPECT_EQ(mounts[0].root, "/mnt1");
  EXPECT_EQ(mounts[0].point, "/mnt2");
  EXPECT_EQ(mounts[0].options, "rw,noatime");
  EXPECT_EQ(mounts[0].fstype, "ext3");
  EXPECT_EQ(mounts[0].source, "/dev/root");
  EXPECT_EQ(mounts[0].super_options, "rw,errors=continue");
  EXPECT_EQ(mounts[1].point, "/dev/shm");
  EXPECT_EQ(mounts[1].super_options, "rw,size=65536k,huge=within_size");
}

TEST(MountInfo, DecodesOctalEscapesOnlyWhereComplete) {
  const auto mounts = hugepage::parse_mountinfo(
      "40 1 0:40 /a\\040b /mnt/my\\040dir\\011tab\\012nl\\134bs rw - tmpfs my\\040src rw\n"
      "41 1 0:41 / /mnt/short\\04 rw - tmpfs x rw\n"
      "42 1 0:42 / /mnt/not\\999octal\\ rw - tmpfs x rw\n");
  ASSERT_EQ(mounts.size(), 3u);
  EXPECT_EQ(mounts[0].root, "/a b");
  EXPECT_EQ(mounts[0].point, "/mnt/my dir\ttab\nnl\\bs");
  EXPECT_EQ(mounts[0].source, "my src");
  EXPECT_EQ(mounts[1].point, "/mnt/short\\04");
  EXPECT_EQ(mounts[2].point, "/mnt/not\\999octal\\");
  EXPECT_EQ(hugepage::detail::unescape_mount_field("\\040"), " ");
  EXPECT_EQ(hugepage::detail::unescape_mount_field("\\"), "\\");
  EXPECT_EQ(hugepage::detail::unescape_mount_field(""), "");
}

TEST(MountInfo, SkipsLinesMissingFieldsAndToleratesRunsOfSpaces) {
  const auto mounts = hugepage::parse_mountinfo(
      "garbage\n"
      "\n"
      "36 35 98:0 /mnt1 /mnt2 rw,noatime ext3 /dev/root rw\n"  // no separator
      "36 35 98:0 /mnt1 /mnt2 - ext3 /dev/root rw\n"           // five fields before it
      "36 35 98:0 /mnt1 /mnt2 rw - ext3 /dev/root\n"           // two after it
      "37  35 98:0 / /ok  rw - ext4 /dev/sda1 rw\r\n"
      "38 35 98:0 / /last rw - ext4 /dev/sda2 rw");  // no newline at the end
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].point, "/ok");
  EXPECT_EQ(mounts[0].super_options, "rw\r");
  EXPECT_EQ(mounts[1].point, "/last");
}

TEST(MountInfo, ReadsUnderARootForAProcess) {
  tree t;
  ASSERT_FALSE(t.root().empty());
  EXPECT_FALSE(hugepage::read_mountinfo(t.root()));  // unreadable: nothing made up
  t.write("/proc/self/mountinfo", "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  t.write("/proc/4242/mountinfo", "31 1 0:27 / /other rw - tmpfs tmpfs rw\n");
  const auto self = hugepage::read_mountinfo(t.root());
  ASSERT_TRUE(self);
  ASSERT_EQ(self->size(), 1u);
  EXPECT_EQ((*self)[0].fstype, "cgroup2");
  const auto other = hugepage::read_mountinfo(t.root(), 4242);
  ASSERT_TRUE(other);
  ASSERT_EQ(other->size(), 1u);
  EXPECT_EQ((*other)[0].point, "/other");
  const auto live = hugepage::read_mountinfo();
  ASSERT_TRUE(live);
  bool root_seen = false;
  for (const mount_info& m : *live) root_seen = root_seen || m.point == "/";
  EXPECT_TRUE(root_seen);
}

// ---- /proc/PID/cgroup --------------------------------------------------------------------------

TEST(ProcCgroup, ParsesLinesKeepingPathsAsWritten) {
  const auto lines = hugepage::parse_proc_cgroup(
      "12:hugetlb:/batch\n"
      "1:name=systemd:/system.slice/a.service\n"
      "garbage\n"
      "2:x\n"
      "0::/odd:path \n");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].hierarchy, "12");
  EXPECT_EQ(lines[0].controllers, "hugetlb");
  EXPECT_EQ(lines[0].path, "/batch");
  EXPECT_EQ(lines[1].controllers, "name=systemd");
  EXPECT_EQ(lines[2].hierarchy, "0");
  EXPECT_EQ(lines[2].controllers, "");
  EXPECT_EQ(lines[2].path, "/odd:path ");
}

TEST(ProcCgroup, PathsOfAControllerTrimmedAndAbsoluteOnly) {
  const auto lines = hugepage::parse_proc_cgroup(
      "3:cpu,hugetlb,pids:/svc\t\n4:memory:relative\n0::/user.slice/a\r\n");
  const hugepage::cgroup_paths hugetlb = hugepage::cgroup_paths_of(lines, "hugetlb");
  EXPECT_EQ(hugetlb.v1.value_or(""), "/svc");
  EXPECT_EQ(hugetlb.v2.value_or(""), "/user.slice/a");
  EXPECT_FALSE(hugepage::cgroup_paths_of(lines, "memory").v1);        // not absolute
  EXPECT_FALSE(hugepage::cgroup_paths_of(lines, "hugetlb,pids").v1);  // one controller only
}

TEST(ProcCgroup, ReadsUnderARootForAProcess) {
  tree t;
  EXPECT_FALSE(hugepage::read_proc_cgroup(t.root(), 7));
  t.write("/proc/7/cgroup", "0::/app.slice\n");
  const auto lines = hugepage::read_proc_cgroup(t.root(), 7);
  ASSERT_TRUE(lines);
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_EQ((*lines)[0].path, "/app.slice");
  // The directories over a tree's files, as the library finds this process's.
  t.write("/proc/7/mountinfo", "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  EXPECT_EQ(hugepage::detail::read_cgroup_directories("hugetlb", t.root(), 7),
            (std::vector<std::string>{"/sys/fs/cgroup/app.slice", "/sys/fs/cgroup"}));
}

// ---- cgroup limit files ------------------------------------------------------------------------

TEST(CgroupLimitFile, MaxNumbersAndUnlimited) {
  using hugepage::parse_cgroup_limit;
  ASSERT_TRUE(parse_cgroup_limit("max\n"));
  EXPECT_FALSE(*parse_cgroup_limit("max\n"));
  EXPECT_EQ(*parse_cgroup_limit(" 1073741824 \nsecond line"),
            std::optional<std::uint64_t>(1073741824));
  EXPECT_FALSE(*parse_cgroup_limit("9223372036854771712\n"));  // v1 "unlimited"
  EXPECT_FALSE(parse_cgroup_limit("lots"));
  EXPECT_FALSE(parse_cgroup_limit("12abc"));
  EXPECT_FALSE(parse_cgroup_limit("-1"));
  EXPECT_FALSE(parse_cgroup_limit(""));
  EXPECT_FALSE(parse_cgroup_limit("99999999999999999999999"));  // overflows
}

TEST(CgroupLimitFile, EventsMaxLineOnly) {
  EXPECT_EQ(hugepage::parse_cgroup_events_max("max 3\n"), std::optional<std::uint64_t>(3));
  EXPECT_EQ(hugepage::parse_cgroup_events_max("low 0\nmax 7\n"), std::optional<std::uint64_t>(7));
  EXPECT_FALSE(hugepage::parse_cgroup_events_max("nomax 3\n"));
  EXPECT_FALSE(hugepage::parse_cgroup_events_max("max x\n"));
  EXPECT_FALSE(hugepage::parse_cgroup_events_max(""));
}

TEST(CgroupLimitFile, HugetlbChargeFilesUnderARoot) {
  tree t;
  const std::string dir = "/sys/fs/cgroup/app.slice";
  t.write(dir + "/hugetlb.2MB.max", "536870912\n");
  t.write(dir + "/hugetlb.2MB.current", "16777216\n");
  t.write(dir + "/hugetlb.2MB.rsvd.max", "max\n");
  t.write(dir + "/hugetlb.2MB.events", "max 3\n");
  t.mkdir(dir + "/hugetlb.1GB.max");  // exists, cannot be read as a file
  using hugepage::hugetlb_charge;
  const auto fault =
      hugepage::read_hugetlb_charge(dir, 2 * mib, hugetlb_charge::fault, true, t.root());
  ASSERT_TRUE(fault.limit);
  EXPECT_EQ(*fault.limit, std::optional<std::uint64_t>(512 * mib));
  EXPECT_EQ(fault.usage, std::optional<std::uint64_t>(16 * mib));
  EXPECT_FALSE(fault.unreadable);
  const auto rsvd =
      hugepage::read_hugetlb_charge(dir, 2 * mib, hugetlb_charge::reservation, true, t.root());
  ASSERT_TRUE(rsvd.limit);
  EXPECT_FALSE(*rsvd.limit);  // "max"
  EXPECT_FALSE(rsvd.usage);
  const auto v1 =
      hugepage::read_hugetlb_charge(dir, 2 * mib, hugetlb_charge::fault, false, t.root());
  EXPECT_FALSE(v1.limit);  // no limit_in_bytes: absent, not unreadable
  EXPECT_FALSE(v1.unreadable);
  const auto gib =
      hugepage::read_hugetlb_charge(dir, 1024 * mib, hugetlb_charge::fault, true, t.root());
  EXPECT_FALSE(gib.limit);
  EXPECT_TRUE(gib.unreadable);
  EXPECT_EQ(hugepage::read_hugetlb_refusals(dir, 2 * mib, true, t.root()),
            std::optional<std::uint64_t>(3));
  EXPECT_FALSE(hugepage::read_hugetlb_refusals(dir, 2 * mib, false, t.root()));
  EXPECT_EQ(hugepage::hugetlb_cgroup_file(2 * mib, hugetlb_charge::reservation, false, true),
            "hugetlb.2MB.rsvd.usage_in_bytes");
  EXPECT_EQ(hugepage::hugetlb_cgroup_file(1024 * mib, hugetlb_charge::fault, true, false),
            "hugetlb.1GB.max");
}

// ---- statm -------------------------------------------------------------------------------------

TEST(Statm, SizeAndResidentOrNothing) {
  const auto statm = hugepage::parse_statm("2571 1020 800 5 0 300 0\n");
  ASSERT_TRUE(statm);
  EXPECT_EQ(statm->size, 2571u);
  EXPECT_EQ(statm->resident, 1020u);
  EXPECT_FALSE(hugepage::parse_statm("12\n"));
  EXPECT_FALSE(hugepage::parse_statm(""));
  EXPECT_FALSE(hugepage::parse_statm("abc 12"));
  EXPECT_FALSE(hugepage::parse_statm("12 abc"));
}

TEST(Statm, ReadsThisProcessAndATree) {
  const auto live = hugepage::read_statm();
  ASSERT_TRUE(live);
  EXPECT_GT(live->size, 0u);
  EXPECT_GT(live->resident, 0u);
  EXPECT_LE(live->resident, live->size);
  tree t;
  EXPECT_FALSE(hugepage::read_statm(t.root(), 9));
  t.write("/proc/9/statm", "100 50 0 0 0 0 0\n");
  EXPECT_EQ(hugepage::read_statm(t.root(), 9).value_or(hugepage::statm_pages{}).resident, 50u);
}

// ---- kernel version ----------------------------------------------------------------------------

TEST(KernelVersion, ParsesTheFirstTwoNumbers) {
  using hugepage::parse_kernel_version;
  static_assert(parse_kernel_version("6.12.3-amd64")->at_least(6, 12));
  EXPECT_EQ(parse_kernel_version("6.18.44-generic")->minor, 18u);
  EXPECT_EQ(parse_kernel_version("5.4")->major, 5u);
  EXPECT_FALSE(parse_kernel_version("6.11.0")->at_least(6, 12));
  EXPECT_TRUE(parse_kernel_version("7.0")->at_least(6, 12));
  EXPECT_FALSE(parse_kernel_version("6"));
  EXPECT_FALSE(parse_kernel_version("6."));
  EXPECT_FALSE(parse_kernel_version("6.x"));
  EXPECT_FALSE(parse_kernel_version("x.1"));
  EXPECT_FALSE(parse_kernel_version(""));
  EXPECT_FALSE(parse_kernel_version("99999999999.1"));
}

TEST(KernelVersion, ReleaseLiveAndUnderARoot) {
  EXPECT_TRUE(hugepage::parse_kernel_version(hugepage::kernel_release()));
  tree t;
  EXPECT_EQ(hugepage::kernel_release(t.root()), "");
  t.write("/proc/sys/kernel/osrelease", "6.8.0-test\n");
  EXPECT_EQ(hugepage::kernel_release(t.root()), "6.8.0-test");
}

// ---- THP switches, per size, khugepaged, pools under a root ------------------------------------

TEST(ThpFiles, SettingsUnderARootTakeThePerSizeSwitch) {
  tree t;
  const std::string thp = "/sys/kernel/mm/transparent_hugepage/";
  const hugepage::thp_settings none = hugepage::read_thp_settings(t.root());
  EXPECT_FALSE(none.enabled);
  EXPECT_FALSE(none.pmd_mode);
  EXPECT_FALSE(none.scan_sleep_millisecs);
  t.write(thp + "enabled", "always [madvise] never\n");
  t.write(thp + "hpage_pmd_size", "2097152\n");
  t.write(thp + "hugepages-2048kB/enabled", "always inherit madvise [never]\n");
  t.write(thp + "khugepaged/scan_sleep_millisecs", "10000\n");
  const hugepage::thp_settings s = hugepage::read_thp_settings(t.root());
  EXPECT_EQ(s.enabled.value_or(""), "madvise");
  EXPECT_EQ(s.pmd_enabled.value_or(""), "never");
  EXPECT_EQ(s.pmd_mode, std::optional<hugepage::thp_mode>(hugepage::thp_mode::never));
  EXPECT_EQ(s.scan_sleep_millisecs, std::optional<std::uint64_t>(10000));
  t.write(thp + "hugepages-2048kB/enabled", "always [inherit] madvise never\n");
  EXPECT_EQ(hugepage::read_thp_settings(t.root()).pmd_mode,
            std::optional<hugepage::thp_mode>(hugepage::thp_mode::madvise));
}

TEST(ThpFiles, SizesUnderARootAscendingWithTheirStats) {
  tree t;
  EXPECT_TRUE(hugepage::read_mthp_sizes(t.root()).empty());
  const std::string thp = "/sys/kernel/mm/transparent_hugepage/";
  t.write(thp + "hugepages-2048kB/enabled", "always inherit [madvise] never\n");
  t.write(thp + "hugepages-2048kB/stats/anon_fault_alloc", "5\n");
  t.write(thp + "hugepages-2048kB/stats/split", "garbage\n");
  t.write(thp + "hugepages-64kB/shmem_enabled", "always inherit within_size advise [never]\n");
  t.write(thp + "hugepages-xkB/enabled", "[always]\n");
  t.write(thp + "hugepages-16kBz/enabled", "[always]\n");
  const std::vector<hugepage::mthp_size> sizes = hugepage::read_mthp_sizes(t.root());
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_EQ(sizes[0].page_bytes, 64u * 1024);
  EXPECT_EQ(sizes[0].enabled, "");
  EXPECT_EQ(sizes[0].shmem_enabled, "never");
  EXPECT_EQ(sizes[1].page_bytes, 2 * mib);
  EXPECT_EQ(sizes[1].enabled, "madvise");
  EXPECT_EQ(sizes[1].stats.at("anon_fault_alloc"), 5u);
  EXPECT_EQ(sizes[1].stats.at("split"), 0u);
  EXPECT_EQ(sizes[1].stats.count("swpout"), 0u);
}

TEST(ThpFiles, SystemStateUnderARoot) {
  tree t;
  t.write("/proc/sys/kernel/osrelease", "6.8.0-test\n");
  const std::string pool = "/sys/kernel/mm/hugepages/hugepages-2048kB/";
  t.write(pool + "nr_hugepages", "8\n");
  t.write(pool + "free_hugepages", "6\n");
  const hugepage::system_state s = hugepage::read_system_state(/*probe=*/false, t.root());
  EXPECT_EQ(s.kernel_release, "6.8.0-test");
  ASSERT_EQ(s.pools.size(), 1u);
  EXPECT_EQ(s.pools[0].page_bytes, 2 * mib);
  EXPECT_EQ(s.pools[0].total, std::optional<std::uint64_t>(8));
  EXPECT_EQ(s.pools[0].free, std::optional<std::uint64_t>(6));
  EXPECT_FALSE(s.pools[0].reserved);
  EXPECT_FALSE(s.thp.enabled);
}

// ---- cpuinfo -----------------------------------------------------------------------------------

TEST(CpuInfo, TakesTheFirstModelAndFlagsLines) {
  const hugepage::cpu_info cpu = hugepage::parse_cpuinfo(
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
      "flags\t\t: fpu vme pse pdpe1gb rdtscp lm\n\nprocessor\t: 1\nmodel name\t: other\n"
      "flags\t\t: fpu\n");
  EXPECT_EQ(cpu.model_name, "Intel(R) Xeon(R) CPU @ 2.20GHz");
  EXPECT_TRUE(cpu.has_flags);
  EXPECT_TRUE(cpu.has_flag("pdpe1gb"));
  EXPECT_TRUE(cpu.has_flag("fpu"));
  EXPECT_FALSE(cpu.has_flag("pdpe1"));
  EXPECT_FALSE(cpu.has_flag("pse36"));
}

TEST(CpuInfo, WithoutModelOrFlags) {
  struct row {
    const char* text;
    const char* model;
    bool has_flags;
  };
  const row rows[] = {
      {"", "", false},
      {"processor\t: 0\nFeatures\t: fp asimd\nCPU part\t: 0xd0c\n", "", false},  // arm64
      {"model name\t:\nflags\t\t:\n", "", true},
      {"garbage without colons\nflags: pdpe1gb\n", "", true},
  };
  for (const row& r : rows) {
    const hugepage::cpu_info cpu = hugepage::parse_cpuinfo(r.text);
    EXPECT_EQ(cpu.model_name, r.model) << r.text;
    EXPECT_EQ(cpu.has_flags, r.has_flags) << r.text;
  }
  EXPECT_TRUE(hugepage::parse_cpuinfo("flags: pdpe1gb\n").has_flag("pdpe1gb"));
  EXPECT_FALSE(hugepage::parse_cpuinfo("model name: x\n").has_flag("pdpe1gb"));
}

TEST(CpuInfo, ReadsThisMachineAndATree) {
  EXPECT_TRUE(hugepage::read_cpuinfo());
  tree t;
  EXPECT_FALSE(hugepage::read_cpuinfo(t.root()));
  t.write("/proc/cpuinfo", "model name\t: Test CPU\nflags\t\t: lm pdpe1gb\n");
  const auto cpu = hugepage::read_cpuinfo(t.root());
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->model_name, "Test CPU");
  EXPECT_TRUE(cpu->has_flag("pdpe1gb"));
}

// ---- meminfo, vmstat, status, smaps_rollup -----------------------------------------------------

TEST(KernelCounters, MeminfoValuesInBytesAndCountsAsTheyAre) {
  struct row {
    const char* line;
    const char* key;
    std::optional<std::uint64_t> value;
  };
  const row rows[] = {
      {"MemAvailable:   20480 kB", "MemAvailable", 20480 * 1024},
      {"HugePages_Total:     600", "HugePages_Total", 600},
      {"Hugepagesize:       2048 kB", "Hugepagesize", 2 * mib},
      {"Unaccepted:            0 kB", "Unaccepted", 0},
      {"SomethingNew:     12 MB", "SomethingNew", std::nullopt},  // not a unit meminfo uses
      {"Uid:\t0\t0\t0\t0", "Uid", std::nullopt},                  // several numbers
      {"Broken: x kB", "Broken", std::nullopt},
      {"NoColon 12 kB", "NoColon", std::nullopt},
      {"Huge:  99999999999999999999 kB", "Huge", std::nullopt},  // overflows
      {"Big:  18014398509481984 kB", "Big", std::nullopt},       // overflows in bytes
  };
  for (const row& r : rows) {
    const hugepage::kernel_values v = hugepage::parse_meminfo(r.line);
    const auto it = v.find(r.key);
    const std::optional<std::uint64_t> got =
        it == v.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
    EXPECT_EQ(got, r.value) << r.line;
  }
}

TEST(KernelCounters, VmstatTakesNameAndAllDigitValue) {
  const hugepage::kernel_values v = hugepage::parse_vmstat(
      "thp_fault_alloc 11096\nthp_fault_fallback\t7\r\nnot_a_number 12x\nlonely_name\n"
      "  padded   5  extra\n-1\n\ncompact_stall 99999999999999999999\n");
  EXPECT_EQ(v.at("thp_fault_alloc"), 11096u);
  EXPECT_EQ(v.at("thp_fault_fallback"), 7u);
  EXPECT_EQ(v.at("padded"), 5u);
  EXPECT_EQ(v.count("not_a_number"), 0u);
  EXPECT_EQ(v.count("lonely_name"), 0u);
  EXPECT_EQ(v.count("-1"), 0u);
  EXPECT_EQ(v.count("compact_stall"), 0u);
  EXPECT_EQ(v.size(), 3u);
}

TEST(KernelCounters, StatusTextNumbersAndMasks) {
  const hugepage::process_status s = hugepage::parse_status(
      "Name:\tfared worker\nUmask:\t0022\nTgid:\t4242\nPPid:\t1\nUid:\t0\t0\t0\t0\n"
      "VmHWM:\t  102400 kB\nHugetlbPages:\t    2048 kB\nTHP_enabled:\t0\n"
      "CapEff:\t000001ffffffffff\nCapBnd:\tnot-hex\nSeccomp:\t2\nName:\tsecond\nno colon\n"
      ":\tno key\n");
  EXPECT_EQ(s.field("Name").value_or(""), "fared worker");  // the first line of a key wins
  EXPECT_EQ(s.field("Seccomp").value_or(""), "2");
  EXPECT_FALSE(s.field("no colon"));
  EXPECT_FALSE(s.field(""));
  EXPECT_EQ(s.number("Tgid"), std::optional<std::uint64_t>(4242));
  EXPECT_EQ(s.number("THP_enabled"), std::optional<std::uint64_t>(0));
  EXPECT_EQ(s.number("VmHWM"), std::optional<std::uint64_t>(102400 * 1024));
  EXPECT_EQ(s.number("HugetlbPages"), std::optional<std::uint64_t>(2 * mib));
  EXPECT_FALSE(s.number("Name"));
  EXPECT_FALSE(s.number("Missing"));
  EXPECT_EQ(s.mask("CapEff"), std::optional<std::uint64_t>(0x1ffffffffffULL));
  EXPECT_FALSE(s.mask("CapBnd"));
  EXPECT_FALSE(s.mask("Missing"));
  EXPECT_EQ(hugepage::parse_status("CapEff:\t00000000000000000\n").mask("CapEff"), std::nullopt);
}

TEST(KernelCounters, SmapsRollupNeedsRss) {
  const auto rollup = hugepage::parse_smaps_rollup(
      "00400000-7ffd1c3fe000 ---p 00000000 00:00 0                  [rollup]\n"
      "Rss:              204800 kB\nAnonHugePages:    102400 kB\nShared_Hugetlb:     2048 kB\n"
      "Private_Hugetlb:  1048576 kB\n");
  ASSERT_TRUE(rollup);
  EXPECT_EQ(rollup->rss, 200 * mib);
  EXPECT_EQ(rollup->anon_huge, 100 * mib);
  EXPECT_EQ(rollup->hugetlb, 1026 * mib);
  EXPECT_EQ(rollup->resident(), 1226 * mib);
  EXPECT_EQ(rollup->huge(), 1126 * mib);
  const auto old = hugepage::parse_smaps_rollup("Rss:  4 kB\n");  // no huge lines: 0
  ASSERT_TRUE(old);
  EXPECT_EQ(old->huge(), 0u);
  EXPECT_FALSE(hugepage::parse_smaps_rollup(""));
  EXPECT_FALSE(hugepage::parse_smaps_rollup("AnonHugePages: 2048 kB\n"));
}

TEST(KernelCounters, ReadersLiveAndUnderARoot) {
  EXPECT_GT(hugepage::read_meminfo_value("MemTotal").value_or(0), 0u);
  EXPECT_TRUE(hugepage::read_vmstat());
  const auto self = hugepage::read_status();
  ASSERT_TRUE(self);
  EXPECT_EQ(self->number("Tgid"), std::optional<std::uint64_t>(::getpid()));
  const auto rollup = hugepage::read_smaps_rollup();
  ASSERT_TRUE(rollup);  // Linux 4.14+
  EXPECT_GT(rollup->rss, 0u);
  tree t;
  EXPECT_FALSE(hugepage::read_meminfo(t.root()));
  EXPECT_FALSE(hugepage::read_meminfo_value("MemTotal", t.root()));
  EXPECT_FALSE(hugepage::read_vmstat(t.root()));
  EXPECT_FALSE(hugepage::read_status(t.root(), 9));
  EXPECT_FALSE(hugepage::read_smaps_rollup(t.root(), 9));
  t.write("/proc/meminfo", "MemTotal:  1024 kB\n");
  t.write("/proc/vmstat", "thp_fault_alloc 3\n");
  t.write("/proc/9/status", "Name:\tx\nTgid:\t9\n");
  t.write("/proc/9/smaps_rollup", "Rss:  8 kB\n");
  EXPECT_EQ(hugepage::read_meminfo(t.root())->at("MemTotal"), 1024u * 1024);
  EXPECT_EQ(hugepage::read_meminfo_value("MemTotal", t.root()),
            std::optional<std::uint64_t>(1 << 20));
  EXPECT_FALSE(hugepage::read_meminfo_value("MemFree", t.root()));
  EXPECT_EQ(hugepage::read_vmstat(t.root())->at("thp_fault_alloc"), 3u);
  EXPECT_EQ(hugepage::read_status_text(t.root(), 9).value_or(""), "Name:\tx\nTgid:\t9\n");
  EXPECT_EQ(hugepage::read_status(t.root(), 9)->field("Name").value_or(""), "x");
  EXPECT_EQ(hugepage::read_smaps_rollup(t.root(), 9)->rss, 8u * 1024);
}

// ---- buddyinfo, zoneinfo -----------------------------------------------------------------------

TEST(KernelMemory, BuddyinfoLinesAndWhyOthersAreRefused) {
  struct row {
    const char* line;
    const char* why;  // "" with a zone: read
    int node;
    const char* zone;
    std::size_t orders;
  };
  const row rows[] = {
      {"Node 0, zone   Normal  70786   6649  35692      0      1", "", 0, "Normal", 5},
      {"Node 1, zone  Movable\t0 0 0 0 0 0 0 0 0 0 0 \r", "", 1, "Movable", 11},
      {"Node 0, zone Normal 1 2 3 4 5 6 7 8 9 10 11 12 13", "", 0, "Normal", 13},
      {"Node 0, zone Normal", "", 0, "Normal", 0},
      {"", "", -1, "", 0},
      {"   \t ", "", -1, "", 0},
      {"Node 0 zone DMA 1", "not 'Node N, zone NAME' and counts", -1, "", 0},
      {"Node x, zone Normal 1 1", "not 'Node N, zone NAME' and counts", -1, "", 0},
      {"Node 1, zone", "not 'Node N, zone NAME' and counts", -1, "", 0},
      {"garbage line", "not 'Node N, zone NAME' and counts", -1, "", 0},
      {"Node 0, zone Device 1 two 3", "bad count 'two'", -1, "", 0},
      {"Node 0, zone Normal -1", "bad count '-1'", -1, "", 0},
      {"Node 0, zone Normal 99999999999999999999", "bad count '99999999999999999999'", -1, "", 0},
  };
  for (const row& r : rows) {
    std::string why = "unset";
    const auto zone = hugepage::parse_buddyinfo_line(r.line, &why);
    if (r.node < 0) {
      EXPECT_FALSE(zone) << r.line;
      EXPECT_EQ(why, r.why) << r.line;
      continue;
    }
    ASSERT_TRUE(zone) << r.line;
    EXPECT_EQ(zone->node, r.node);
    EXPECT_EQ(zone->zone, r.zone);
    EXPECT_EQ(zone->free_blocks.size(), r.orders) << r.line;
  }
}

TEST(KernelMemory, BuddyinfoSkipsWhatItCannotReadAndCountsBlocks) {
  const std::vector<hugepage::buddy_zone> zones = hugepage::parse_buddyinfo(
      "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1"
      "      1      3 \ngarbage\nNode 0, zone   Normal    100 50 25 12 6 3 1 1 1 1 2\n"
      "Node 0, zone  Device      1    two      3\n");
  ASSERT_EQ(zones.size(), 2u);
  EXPECT_EQ(zones[0].zone, "DMA");
  EXPECT_EQ(zones[1].free_blocks[0], 100u);
  EXPECT_EQ(zones[1].blocks_of(9), 1u + 2 * 2u);
  EXPECT_EQ(zones[1].free_bytes_from(9, 4096), 2 * mib + 2 * 4 * mib);
  EXPECT_EQ(zones[0].free_bytes(4096), (256 + 512 + 3 * 1024) * 4 * 1024u);
  EXPECT_TRUE(hugepage::parse_buddyinfo("").empty());
}

TEST(KernelMemory, ZoneinfoSumsPerCpuCountsPerZone) {
  const std::vector<hugepage::zone_info> zones = hugepage::parse_zoneinfo(
      "  count: 1000\n"  // before any zone: skipped
      "Node 0, zone      DMA\n  per-node stats\n      nr_free_pages 3840\n  pagesets\n"
      "    cpu: 0\n              count: 0\n              high:  0\n"
      "Node 0, zone    Normal\n  pages free     70786\n  pagesets\n    cpu: 0\n"
      "              count: 120\n              high:  378\n    cpu: 1\n"
      "              count: 31\n              count: x\n"
      "Node 1, zone    Normal\n    cpu: 0\n              count: 7\n");
  ASSERT_EQ(zones.size(), 3u);
  EXPECT_EQ(zones[0].zone, "DMA");
  EXPECT_EQ(zones[0].per_cpu_free_pages, 0u);
  EXPECT_EQ(zones[1].per_cpu_free_pages, 151u);
  EXPECT_EQ(zones[2].node, 1);
  EXPECT_EQ(zones[2].per_cpu_free_pages, 7u);
  EXPECT_EQ(hugepage::per_cpu_free_pages(zones), 158u);
  EXPECT_TRUE(hugepage::parse_zoneinfo("").empty());
}

TEST(KernelMemory, ReadersLiveAndUnderARoot) {
  const auto live = hugepage::read_buddyinfo();
  ASSERT_TRUE(live);
  EXPECT_FALSE(live->empty());
  const auto zoneinfo = hugepage::read_zoneinfo();
  ASSERT_TRUE(zoneinfo);
  EXPECT_GE(zoneinfo->size(), live->size());  // zoneinfo lists empty zones too
  tree t;
  EXPECT_FALSE(hugepage::read_buddyinfo(t.root()));
  EXPECT_FALSE(hugepage::read_zoneinfo(t.root()));
  t.write("/proc/buddyinfo", "Node 0, zone Normal 1 2 3\n");
  t.write("/proc/zoneinfo", "Node 0, zone Normal\n  count: 5\n");
  EXPECT_EQ(hugepage::read_buddyinfo_text(t.root()).value_or(""), "Node 0, zone Normal 1 2 3\n");
  EXPECT_EQ(hugepage::read_buddyinfo(t.root())->at(0).free_blocks.size(), 3u);
  EXPECT_EQ(hugepage::read_zoneinfo(t.root())->at(0).per_cpu_free_pages, 5u);
}

// ---- what is not a regular file ----------------------------------------------------------------

// Runs `readers` in a child with 1 GiB of address space and waits at most 5 s: 0 when every reader
// gave nullopt, 1 when one read something, 2 on bad_alloc, -1 when it hung and was killed.
template <class Readers>
int child_outcome(Readers readers) {
  const pid_t child = ::fork();
  if (child == 0) {
    const rlimit limit{1UL << 30, 1UL << 30};
    ::setrlimit(RLIMIT_AS, &limit);
    try {
      ::_exit(readers() ? 0 : 1);
    } catch (const std::bad_alloc&) {
      ::_exit(2);
    }
  }
  int status = 0;
  for (int waited = 0; waited < 500; ++waited) {
    if (::waitpid(child, &status, WNOHANG) == child) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return -1;
}

TEST(KernelReaders, RefuseAFifoAndADeviceUnderARootPromptly) {
  tree t;
  t.mkdir("/proc");
  ASSERT_EQ(::mkfifo((t.root() + "/proc/meminfo").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/dev/zero", (t.root() + "/proc/vmstat").c_str()), 0);
  EXPECT_EQ(child_outcome([&] { return !hugepage::read_meminfo(t.root()); }), 0);
  EXPECT_EQ(child_outcome([&] { return !hugepage::read_vmstat(t.root()); }), 0);
  std::error_code ec;
  EXPECT_FALSE(hugepage::read_kernel_text(t.root(), "/proc/vmstat", &ec));
  EXPECT_EQ(ec, std::error_code(EINVAL, std::generic_category()));
  EXPECT_FALSE(hugepage::read_kernel_text(t.root(), "/proc", &ec));  // a directory
  EXPECT_EQ(ec, std::error_code(EINVAL, std::generic_category()));
  const auto small_file_refused = [&](const char* path) {
    char buffer[64];
    return hugepage::detail::read_small_file((t.root() + path).c_str(), buffer, sizeof buffer) < 0;
  };
  EXPECT_EQ(child_outcome([&] { return small_file_refused("/proc/meminfo"); }), 0);
  EXPECT_EQ(child_outcome([&] { return small_file_refused("/proc/vmstat"); }), 0);
  // procfs and sysfs files are regular with size 0 and still read.
  EXPECT_TRUE(hugepage::read_kernel_text("", "/proc/self/status"));
  EXPECT_TRUE(hugepage::read_kernel_text("", "/sys/kernel/mm/transparent_hugepage/enabled"));
}

// A regular file larger than the readers' bound (detail::max_text_file_bytes, 256 MiB) is refused
// with EFBIG by its size, before a byte is read: a 4 GiB sparse file under a root was read whole
// (std::bad_alloc, or an abort in a caller that does not catch it).
TEST(KernelReaders, RefuseAFileLargerThanTheirBound) {
  tree t;
  t.write("/proc/self/environ", "");
  t.write("/proc/meminfo", "");
  for (const char* path : {"/proc/self/environ", "/proc/meminfo"}) {
    ASSERT_EQ(::truncate((t.root() + path).c_str(), off_t{4} << 30), 0);  // 4 GiB, no block
  }
  const int code = child_outcome([&] {
    std::error_code ec;
    if (hugepage::read_kernel_text(t.root(), "/proc/self/environ", &ec)) return false;
    if (ec != std::error_code(EFBIG, std::generic_category())) return false;
    return !hugepage::read_meminfo(t.root());
  });
  EXPECT_EQ(code, 0) << "1: read or another error, 2: bad_alloc, -1: still reading after 5 s";
  t.write("/proc/meminfo", "MemTotal: 1024 kB\n");  // a small file still reads
  EXPECT_TRUE(hugepage::read_meminfo(t.root()));
}

// ---- the parsers do what their comments say -------------------------------------------------

TEST(KernelParsers, StatmVersionAndEventsMaxTakeWholeWords) {
  using hugepage::parse_cgroup_events_max;
  using hugepage::parse_kernel_version;
  using hugepage::parse_statm;
  const auto statm = parse_statm(" 10 20\n");  // leading blanks skipped, not a second number
  ASSERT_TRUE(statm);
  EXPECT_EQ(statm->size, 10u);
  EXPECT_EQ(statm->resident, 20u);
  EXPECT_FALSE(parse_statm("10x 20"));
  EXPECT_FALSE(parse_statm("10 20x"));
  EXPECT_FALSE(parse_kernel_version("6x.18"));
  EXPECT_FALSE(parse_kernel_version("6 junk.18"));
  EXPECT_FALSE(parse_kernel_version("6 7.18"));
  EXPECT_EQ(parse_kernel_version(" 6.18")->minor, 18u);
  EXPECT_EQ(parse_cgroup_events_max("xmax 5\nmax 7\n"), std::optional<std::uint64_t>(7));
  EXPECT_EQ(parse_cgroup_events_max("max 7\r\n"), std::optional<std::uint64_t>(7));
  EXPECT_FALSE(parse_cgroup_events_max("max 5x\n"));
  EXPECT_FALSE(parse_cgroup_events_max("max 99999999999999999999\n"));
}

TEST(KernelParsers, StatusFirstLineWinsForTextAndNumbers) {
  const hugepage::process_status s =
      hugepage::parse_status("THP_enabled:\t1\nTHP_enabled:\t0\nVmHWM:\t4 kB\nVmHWM:\t8 kB\n");
  EXPECT_EQ(s.field("THP_enabled").value_or(""), "1");
  EXPECT_EQ(s.number("THP_enabled"), std::optional<std::uint64_t>(1));
  EXPECT_EQ(s.number("VmHWM"), std::optional<std::uint64_t>(4096));
  // A trailing \r: meminfo's lines read as status's do.
  EXPECT_EQ(hugepage::parse_meminfo("MemTotal:  5 kB\r\n").count("MemTotal"), 1u);
  EXPECT_EQ(hugepage::parse_meminfo("MemTotal:  5 kB\r\n").at("MemTotal"), 5u * 1024);
  EXPECT_EQ(hugepage::parse_status("Tgid:\t7\r\n").number("Tgid"), std::optional<std::uint64_t>(7));
}

// Found by the fuzzer (test/fuzz/kernel_counters_fuzz.cpp): the number of a key came from a later
// line than its text did, or under a key trimmed differently, so field() and number() disagreed.
TEST(KernelParsers, StatusNumberComesFromTheLineItsFieldCameFrom) {
  const hugepage::process_status later =
      hugepage::parse_status("VmRSS:\t1756 kirectMap1G:\nVmRSS:\t5 kB\n");
  EXPECT_EQ(later.field("VmRSS").value_or(""), "1756 kirectMap1G:");
  EXPECT_EQ(later.number("VmRSS"), std::nullopt);  // the first line has no number
  const hugepage::process_status blanks =
      hugepage::parse_status(" VmHWM :\t4 kB\nVmHWM:\tx\nName:\tcat\r \r\n");
  EXPECT_EQ(blanks.field("VmHWM").value_or(""), "4 kB");  // keys are trimmed as numbers' are
  EXPECT_EQ(blanks.number("VmHWM"), std::optional<std::uint64_t>(4096));
  EXPECT_EQ(blanks.field("Name").value_or(""), "cat");
  EXPECT_EQ(blanks.text.size(), 2u);
}

TEST(KernelParsers, SumsSaturateInsteadOfWrapping) {
  const std::uint64_t max = UINT64_MAX;
  const auto rollup = hugepage::parse_smaps_rollup(
      "Rss:  18014398509481983 kB\nAnonHugePages: 18014398509481983 kB\n"
      "Private_Hugetlb:  18014398509481983 kB\nShared_Hugetlb:  18014398509481983 kB\n");
  ASSERT_TRUE(rollup);
  EXPECT_EQ(rollup->hugetlb, max);
  EXPECT_EQ(rollup->resident(), max);
  EXPECT_EQ(rollup->huge(), max);
  const auto huge_count =
      hugepage::parse_buddyinfo_line("Node 0, zone Normal 18446744073709551615");
  ASSERT_TRUE(huge_count);
  EXPECT_EQ(huge_count->free_bytes(4096), max);
  EXPECT_EQ(huge_count->blocks_of(0), max);
  std::string orders = "Node 0, zone Normal";
  for (int order = 0; order < 72; ++order) orders += order == 71 ? " 1" : " 0";
  const auto high = hugepage::parse_buddyinfo_line(orders);
  ASSERT_TRUE(high);
  EXPECT_EQ(high->free_bytes(4096), max);  // a free block at order 71 counts, saturated
  EXPECT_EQ(high->blocks_of(0), max);
  EXPECT_EQ(high->blocks_of(9), std::uint64_t{1} << 62);
  EXPECT_EQ(high->blocks_of(71), 1u);
  const auto zones = hugepage::parse_zoneinfo(
      "Node 0, zone Normal\n  count: 18446744073709551615\n  count: 2\n"
      "Node 0, zone Movable\n  count: 3\n");
  ASSERT_EQ(zones.size(), 2u);
  EXPECT_EQ(zones[0].per_cpu_free_pages, max);
  EXPECT_EQ(hugepage::per_cpu_free_pages(zones), max);
}

}  // namespace
