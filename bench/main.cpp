// hugepage_bench - what huge pages buy big containers, per allocator and working set.
//
// Rows are named BM_<Suite>/<allocator>/<working_set_bytes> (bench/runner parses this), e.g.
// BM_FlatHashMap_Lookup/thp/1073741824. Allocators: std, thp, hugetlb_2m, hugetlb_1g, collapse,
// thp_prefault (FaultIn only), and the node backends pmr_pool and arena_mt. The suites live in
// suites_<family>.cpp, one declare() each (registry.hpp); `hugepage_bench --list` shows them and
// the project's other benchmark programs, `--list --json` prints the registry for the runner.
// --paired runs the suites that declare contenders with all of them in one process, rows
// BM_<Suite>/paired/<bytes> (paired.cpp); --headroom prints what huge pages save a dependent
// chase at the working sets (headroom.cpp), and --machine-facts --json the kernel, the effective
// THP mode and the pools as the library reads them (listing.cpp), for the runner's machine header.
//
// Counters per row: page_faults (per iteration), page_walks_per_op / dtlb_loads_per_op /
// cycles_per_op / instructions_per_op only where the PMU counts them, coverage_pct (huge-page
// share of the container, from hugepage::backing_of), container_mib, rss_mib and peak_rss_mib;
// the tail suites add lat_p50_ns, lat_p99_ns, lat_p999_ns and timer_ns (latency.hpp).
//
// Flags of our own (removed before google-benchmark sees argv): --list [--json], --quick,
// --sizes=4M,64M,1G, --allocators=std,thp,..., --suites=FlatHashMap_Lookup,..., --cpu=N,
// --paired [--rounds=N] [--round-seconds=S], --headroom, --machine-facts --json, --plan --json
// (what a run with the other flags would run and leave out, and why: nothing is run).
// Everything else goes to google-benchmark (--benchmark_repetitions, --benchmark_format=json,
// --benchmark_out, ...).
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <fmt/format.h>
#include <malloc.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "latency.hpp"
#include "modes.hpp"
#include "peers.hpp"
#include "registry.hpp"

namespace hugepage_bench {
namespace {

// ---- flags
// ---------------------------------------------------------------------------------------

struct options {
  bool quick = false;
  std::vector<std::size_t> sizes;  // empty: the defaults
  bool sizes_given = false;
  std::vector<alloc_kind> allocators;
  std::vector<const suite_info*> suites;
  bool list = false;
  bool list_json = false;
  bool headroom = false;
  bool machine_facts = false;
  bool plan = false;
  bool paired = false;
  paired_options pairing;
  std::optional<int> cpu;
};

[[noreturn]] void usage_error(const std::string& message) {
  fmt::print(stderr, "hugepage_bench: {}\n", message);
  std::exit(2);
}

// The names of a --suites= or --allocators= list. An empty list or element is a usage error, as
// for --sizes: "--suites=" or "a,,b" is a typo, not a request for every suite.
std::vector<std::string> split_names(const std::string& text, const char* flag) {
  if (text.empty()) usage_error(fmt::format("{}= names nothing", flag));
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    if (end == begin) usage_error(fmt::format("empty name in {}={}", flag, text));
    parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

// The one size grammar of the benchmark (bench/runner/util.py parse_size reads the same, and
// scripts/bench asks it): digits, an optional fraction, an optional K, M, G or T (any case,
// optionally followed by B or iB), binary units; bytes without a unit; a whole number of bytes
// from 1 to 2^62, computed exactly (no rounding through a double).
std::size_t parse_size(const std::string& text) {
  const auto bad = [&text]() {
    usage_error("bad size '" + text + "' (e.g. 4M, 256MiB, 1.5G, 4096)");
  };
  std::size_t at = 0;
  const auto digits = [&]() {
    const std::size_t from = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    return at > from;
  };
  if (!digits()) bad();
  const std::size_t point = at;
  if (at < text.size() && text[at] == '.' && (++at, !digits())) bad();
  // The number as its digits m over 10^f (f fraction digits, trailing zeros off), at most 19
  // significant digits (runner/util.py reads the same).
  const std::string whole = text.substr(0, point);
  std::string fraction = point < at ? text.substr(point + 1, at - point - 1) : "";
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  std::string mantissa = whole + fraction;
  mantissa.erase(0, std::min(mantissa.find_first_not_of('0'), mantissa.size()));
  if (mantissa.size() > 19 || fraction.size() > 27) bad();  // 5^28 > 10^19: never whole
  std::uint64_t m = 0;
  for (const char c : mantissa) m = m * 10 + static_cast<std::uint64_t>(c - '0');
  std::string unit = text.substr(at);
  int shift = 0;
  if (!unit.empty()) {
    const char* letters = "KMGT";
    const char* found = std::strchr(letters, std::toupper(static_cast<unsigned char>(unit[0])));
    if (found == nullptr || *found == '\0') bad();
    shift = 10 * static_cast<int>(found - letters + 1);
    unit = unit.substr(1);
    if (!unit.empty() && unit != "B" && unit != "iB") bad();
  }
  // bytes = m * 2^shift / (5^f * 2^f), exactly: 5^f must divide m, then the powers of two.
  const int f = static_cast<int>(fraction.size());
  std::uint64_t five_to_f = 1;
  for (int i = 0; i < f; ++i) five_to_f *= 5;
  if (m == 0 || m % five_to_f != 0) bad();
  std::uint64_t bytes = m / five_to_f;
  if (f > shift) {
    if (bytes % (std::uint64_t{1} << (f - shift)) != 0) bad();
    bytes >>= f - shift;
  } else if (bytes > (std::uint64_t{1} << 62) >> (shift - f)) {
    bad();
  } else {
    bytes <<= shift - f;
  }
  if (bytes > std::uint64_t{1} << 62) bad();
  return static_cast<std::size_t>(bytes);
}

// --sizes=A,B,...: at least one size and no empty one (a stray comma is a typo, never "the
// defaults"); bench/runner/util.py parse_size_list reads the same.
std::vector<std::size_t> parse_sizes(const std::string& text) {
  if (text.empty()) usage_error("--sizes= names no size (e.g. --sizes=4M,64M,1G)");
  std::vector<std::size_t> sizes;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    if (end == begin) usage_error("empty size in --sizes=" + text + " (e.g. --sizes=4M,64M,1G)");
    sizes.push_back(parse_size(text.substr(begin, end - begin)));
    if (end == text.size()) return sizes;
    begin = end + 1;
  }
}

// A count in ASCII digits (no sign, no space: the runner reads it the same way) from low to high.
int parse_count(const char* text, const char* flag, int low, int high) {
  const std::size_t digits = std::strspn(text, "0123456789");
  const long value = digits > 0 && digits <= 9 && text[digits] == '\0' ? std::atol(text) : -1;
  if (value < low || value > high) {
    usage_error(fmt::format("bad {}={} ({} to {})", flag, text, low, high));
  }
  return static_cast<int>(value);
}

options parse_flags(int& argc, char** argv) {
  options o;
  int out = 1;
  const auto value_of = [](const char* arg, const char* flag) -> const char* {
    const std::size_t n = std::strlen(flag);
    return std::strncmp(arg, flag, n) == 0 && arg[n] == '=' ? arg + n + 1 : nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--quick") == 0) {
      o.quick = true;
    } else if (std::strcmp(arg, "--list") == 0) {
      o.list = true;
    } else if (std::strcmp(arg, "--json") == 0) {
      o.list_json = true;
    } else if (std::strcmp(arg, "--headroom") == 0) {
      o.headroom = true;
    } else if (std::strcmp(arg, "--machine-facts") == 0) {
      o.machine_facts = true;
    } else if (std::strcmp(arg, "--plan") == 0) {
      o.plan = true;
    } else if (std::strcmp(arg, "--paired") == 0) {
      o.paired = true;
    } else if (const char* rounds = value_of(arg, "--rounds")) {
      o.pairing.rounds = parse_count(rounds, "--rounds", 1, paired_max_rounds);
    } else if (const char* seconds = value_of(arg, "--round-seconds")) {
      o.pairing.round_seconds = parse_count(seconds, "--round-seconds", 0, 3600);
    } else if (const char* sizes = value_of(arg, "--sizes")) {
      o.sizes_given = true;
      o.sizes = parse_sizes(sizes);
    } else if (const char* allocators = value_of(arg, "--allocators")) {
      for (const std::string& a : split_names(allocators, "--allocators")) {
        const auto* k = std::find_if(std::begin(all_kinds), std::end(all_kinds),
                                     [&](alloc_kind c) { return a == token_of(c); });
        if (k == std::end(all_kinds)) {
          std::string known;
          for (const alloc_kind c : all_kinds)
            known += (known.empty() ? "" : ", ") + std::string(token_of(c));
          usage_error("unknown allocator '" + a + "' (" + known + ")");
        }
        o.allocators.push_back(*k);
      }
    } else if (const char* suites = value_of(arg, "--suites")) {
      for (std::string s : split_names(suites, "--suites")) {
        if (s.rfind("BM_", 0) == 0) s = s.substr(3);
        const auto found = std::find_if(registry().begin(), registry().end(),
                                        [&](const suite_info& c) { return s == c.name; });
        if (found == registry().end()) {
          usage_error("unknown suite '" + s + "' (hugepage_bench --list shows them)");
        }
        o.suites.push_back(&*found);
      }
    } else if (const char* cpu = value_of(arg, "--cpu")) {
      o.cpu = parse_count(cpu, "--cpu", 0, CPU_SETSIZE - 1);
    } else {
      argv[out++] = argv[i];
      continue;
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return o;
}

// ---- context
// -------------------------------------------------------------------------------------

std::string cpu_model() {
  const std::optional<hugepage::cpu_info> cpu = hugepage::read_cpuinfo();
  return cpu && !cpu->model_name.empty() ? cpu->model_name : "unknown";
}

std::string describe_pools() {
  std::string text;
  for (const std::size_t bytes : hugepage::pool_page_sizes()) {
    const auto pool = hugepage::read_pool(bytes);
    if (!pool) continue;
    if (!text.empty()) text += "; ";
    text += fmt::format(
        "{}: total {}, free {}, available {}",
        bytes >= gib ? fmt::format("{} GiB", bytes / gib) : fmt::format("{} MiB", bytes / mib),
        pool->total.value_or(0), pool->free.value_or(0), pool->available().value_or(0));
  }
  return text.empty() ? "none" : text;
}

// "a, b: reason; c: other reason" for the counters that cannot be read; "" when all can.
std::string describe_counters() {
  std::vector<std::pair<std::string, std::string>> groups;  // reason, events
  for (std::size_t i = 0; i < hugepage::perf_event_count; ++i) {
    const auto e = static_cast<hugepage::perf_event>(i);
    if (counters().available(e)) continue;
    const std::string& reason = counters().unavailable_reason(e);
    const auto it = std::find_if(groups.begin(), groups.end(),
                                 [&](const auto& g) { return g.first == reason; });
    if (it == groups.end()) {
      groups.emplace_back(reason, hugepage::short_name_of(e));
    } else {
      it->second += std::string(", ") + hugepage::short_name_of(e);
    }
  }
  std::string text;
  for (const auto& [reason, events] : groups) {
    text += fmt::format("{}{}: {}", text.empty() ? "" : "; ", events, reason);
  }
  return text;
}

std::string size_token(std::size_t bytes) {
  if (bytes % gib == 0) return fmt::format("{}G", bytes / gib);
  if (bytes % mib == 0) return fmt::format("{}M", bytes / mib);
  return fmt::format("{}", bytes);
}

// The console reporter prints the custom context itself; other formats only store it.
bool print_context = false;

void add_context(const std::string& key, const std::string& value) {
  if (print_context) fmt::print(stderr, "{:<22} {}\n", key + ":", value);
  benchmark::AddCustomContext(key, value);
}

// ---- counter cross-check ------------------------------------------------------------------------

// A core PMU in sysfs (x86 "cpu", hybrid "cpu_core"/"cpu_atom", Arm "armv8_*"). Virtual machines
// without a virtual PMU have only the software ones (software, tracepoint, breakpoint, ...).
std::string core_pmu() {
  DIR* dir = ::opendir("/sys/bus/event_source/devices");
  if (dir == nullptr) return {};
  std::string found;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "cpu" || name == "cpu_core" || name == "cpu_atom" || name.rfind("armv8", 0) == 0) {
      found = name;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

#if defined(HUGEPAGE_WITH_LIBPFM)
// libpfm4's encoding of `event` as "type:config", or why there is none.
std::string pfm_encoding(const std::string& event, std::optional<perf_event_attr>& attr) {
  std::string error;
  attr = hugepage::pfm::encode(event, /*user_only=*/false, error);
  if (!attr) return "unknown to libpfm4 (" + error + ")";
  return fmt::format("type {} config {:#x}", attr->type, attr->config);
}
#endif

// Checks the encodings of the dTLB events the bench counts against libpfm4's, for the machine
// header: the generic events always (libpfm4 knows the kernel's generic encodings without a
// PMU), the CPU's raw dTLB events only where a core PMU exists.
std::string counter_check() {
  const std::string pmu = core_pmu();
  const std::string no_pmu =
      "no PMU (no core PMU under /sys/bus/event_source/devices): the CPU's raw dTLB events not "
      "checked";
#if !defined(HUGEPAGE_WITH_LIBPFM)
  return (pmu.empty() ? no_pmu : "PMU " + pmu) +
         "; not checked against libpfm4 (built without -DHUGEPAGE_WITH_LIBPFM=ON)";
#else
  if (!hugepage::pfm::initialize().empty()) return hugepage::pfm::initialize();
  std::string text;
  const std::pair<hugepage::perf_event, const char*> generic[] = {
      {hugepage::perf_event::dtlb_loads, "perf::PERF_COUNT_HW_CACHE_DTLB:READ:ACCESS"},
      {hugepage::perf_event::dtlb_load_misses, "perf::PERF_COUNT_HW_CACHE_DTLB:READ:MISS"}};
  for (const auto& [event, pfm_name] : generic) {
    const perf_event_attr ours = hugepage::attr_of(event);
    std::optional<perf_event_attr> theirs;
    const std::string enc = pfm_encoding(pfm_name, theirs);
    const bool same = theirs && theirs->type == ours.type && theirs->config == ours.config;
    text += fmt::format("{}{} type {} config {:#x}: {}", text.empty() ? "" : "; ",
                        hugepage::short_name_of(event), ours.type, ours.config,
                        same ? "= libpfm4's" : "DIFFERS from libpfm4's " + enc);
  }
  if (pmu.empty()) return no_pmu + "; generic " + text;
  text = "PMU " + pmu + "; generic " + text;
  // The raw events of this CPU model: what the kernel's generic dTLB-load-misses stands for, and
  // the page-walk cycles the bench reads (walk_cycles_event).
  for (const char* raw : {"DTLB_LOAD_MISSES.WALK_COMPLETED", "DTLB_LOAD_MISSES.MISS_CAUSES_A_WALK",
                          "DTLB_LOAD_MISSES.WALK_ACTIVE", "DTLB_LOAD_MISSES.WALK_DURATION"}) {
    std::optional<perf_event_attr> attr;
    const std::string enc = pfm_encoding(raw, attr);
    if (attr) text += fmt::format("; {} {}", raw, enc);
  }
  // The generic miss count against the raw walk count over the same chase: they agree when the
  // kernel maps dTLB-load-misses to this CPU's completed walks.
  hugepage::perf_counters generic_counter({hugepage::perf_event::dtlb_load_misses});
  hugepage::pfm::raw_counter raw_counter(
      {"DTLB_LOAD_MISSES.WALK_COMPLETED", "DTLB_LOAD_MISSES.MISS_CAUSES_A_WALK"});
  if (!generic_counter.available(hugepage::perf_event::dtlb_load_misses) ||
      !raw_counter.available()) {
    return text + "; counts not compared (generic or raw event cannot be opened)";
  }
  std::vector<u64> data(64 * mib / sizeof(u64));
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = index_of(i, data.size());
  u64 at = 0;
  raw_counter.start();
  generic_counter.start();
  for (std::size_t i = 0; i < 2'000'000; ++i) at = data[(at + i) % data.size()];
  const hugepage::perf_reading g = generic_counter.stop();
  const auto r = raw_counter.stop();
  benchmark::DoNotOptimize(at);
  const auto gv = g[hugepage::perf_event::dtlb_load_misses];
  if (!gv || !r || *r == 0) return text + "; counts not compared (no reading)";
  const double ratio = *gv / static_cast<double>(*r);
  return text + fmt::format("; over a 64 MiB random walk generic/raw {} = {:.3f} ({})",
                            raw_counter.name(), ratio,
                            ratio > 0.9 && ratio < 1.1 ? "agree" : "DISAGREE");
#endif
}

// ---- the run, step by step: answer, select, plan, describe, register, run
// -----------------------------------------------------------------------

// --list, --machine-facts, --plan's flag checks and --headroom: what answers without running a
// benchmark. The status to exit with, or nullopt when the flags ask for a run (or a plan).
std::optional<int> answer_without_running(const options& o) {
  if (o.list) {
    if (o.list_json) {
      print_registry_json();
    } else {
      print_registry_text();
    }
    return 0;
  }
  if (o.machine_facts && !o.list_json) usage_error("--machine-facts prints JSON: add --json");
  if (o.machine_facts) return print_machine_facts_json();
  if (o.plan && !o.list_json) usage_error("--plan prints JSON: add --json");
  if (o.list_json && !o.plan) usage_error("--json goes with --list, --machine-facts or --plan");
  if (!o.headroom) return std::nullopt;
  std::vector<std::size_t> sizes = o.sizes;
  if (!o.sizes_given) {
    for (const suite_info& s : registry()) {
      for (const std::size_t b : o.quick ? s.run.sizes_quick : s.run.sizes) {
        if (std::find(sizes.begin(), sizes.end(), b) == sizes.end()) sizes.push_back(b);
      }
    }
  }
  std::sort(sizes.begin(), sizes.end());
  return print_headroom(sizes);
}

void pin_to_cpu(const options& o) {
  if (!o.cpu) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(*o.cpu, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    usage_error(fmt::format("cannot pin to CPU {}: {}", *o.cpu, std::strerror(errno)));
  }
}

// google-benchmark's own flags: what parse_flags left in argv, behind a shortened min_time under
// --quick (the caller's own --benchmark_min_time, later in argv, still wins). Holds pointers into
// itself: made in place, never copied.
struct benchmark_flags {
  benchmark_flags(int argc, char** argv, bool quick) : args(argv, argv + argc) {
    if (quick) args.insert(args.begin() + 1, quick_min_time.data());
    args.push_back(nullptr);
    count = static_cast<int>(args.size()) - 1;
  }
  benchmark_flags(const benchmark_flags&) = delete;
  benchmark_flags& operator=(const benchmark_flags&) = delete;

  // The last --benchmark_format= given: true unless it names the console; nullopt when none is.
  std::optional<bool> machine_readable_format() const {
    std::optional<bool> yes;
    constexpr const char* format = "--benchmark_format=";
    for (int i = 1; i < count; ++i) {
      if (std::strncmp(args[i], format, std::strlen(format)) == 0) {
        yes = std::strcmp(args[i] + std::strlen(format), "console") != 0;
      }
    }
    return yes;
  }

  std::string quick_min_time = "--benchmark_min_time=0.1";
  std::vector<char*> args;
  int count = 0;
};

// What to run: the suites named, or the registry's default (--quick: the quick ones; --paired:
// every suite that declares contenders), and every allocator unless --allocators named some.
void select_suites_and_allocators(options& o) {
  if (o.suites.empty()) {
    for (const suite_info& s : registry()) {
      if (s.schedule.only_when_named) continue;
      if (o.paired || !o.quick || s.schedule.in_quick) o.suites.push_back(&s);
    }
  }
  if (o.paired) {
    o.suites = pairable(o.suites);
    if (o.suites.empty()) usage_error("--paired: none of the suites selected has contenders");
  }
  if (o.allocators.empty()) o.allocators.assign(std::begin(all_kinds), std::end(all_kinds));
}

// A suite's working sets: --sizes for every suite, else its own defaults.
const std::vector<std::size_t>& sizes_of(const options& o, const suite_info& s) {
  return o.sizes_given ? o.sizes : (o.quick ? s.run.sizes_quick : s.run.sizes);
}

// Every working set of the selected suites, each judged against the memory the machine has.
std::vector<planned_size> plan_sizes(const options& o, const memory_room& room) {
  std::vector<std::size_t> wanted;
  for (const suite_info* s : o.suites) {
    for (const std::size_t size : sizes_of(o, *s)) {
      if (std::find(wanted.begin(), wanted.end(), size) == wanted.end()) wanted.push_back(size);
    }
  }
  std::sort(wanted.begin(), wanted.end());
  // --paired holds every contender's container at once.
  std::size_t held = 1;
  for (const suite_info* s : o.suites) {
    if (o.paired) held = std::max(held, s->run.contenders.size());
  }
  std::vector<planned_size> plan;
  for (const std::size_t size : wanted) {
    // A row needs its container (a map is ~1.06x its working set) plus temporaries: ask for
    // 1.25x and a 512 MiB margin, so the run never pushes the machine into reclaim. Saturating:
    // a size near 2^62 times the contenders is past any machine, not a small number.
    const std::size_t each = o.paired ? size + size / 8 : size + size / 4;
    std::size_t need = 0;
    if (__builtin_mul_overflow(each, o.paired ? held : 1, &need) ||
        __builtin_add_overflow(need, 512 * mib, &need)) {
      need = SIZE_MAX;
    }
    plan.push_back({size, need, does_not_fit(need, room)});
  }
  return plan;
}

// The allocators that can run here (a 1 GiB pool with no free page cannot), and each one left
// out with why (--paired registers its contenders itself: none).
std::vector<alloc_kind> allocators_that_run(
    const options& o, std::vector<std::pair<std::string, std::string>>& left_out) {
  std::vector<alloc_kind> allocators;
  for (const alloc_kind k : o.paired ? std::vector<alloc_kind>{} : o.allocators) {
    if (k == alloc_kind::hugetlb_1g) {
      const auto pool = hugepage::read_pool(hugepage::page_size::huge_1g);
      const u64 free_pages = pool ? pool->available().value_or(0) : 0;
      if (free_pages == 0) {
        left_out.emplace_back("hugetlb_1g", pool ? "no 1 GiB page available in the pool"
                                                 : "this kernel/CPU has no 1 GiB hugetlb pool");
        continue;
      }
    }
    allocators.push_back(k);
  }
  return allocators;
}

// The machine and the run's settings, printed once at the top (stderr, so JSON on stdout stays
// clean) and stored in the JSON's context.
void describe_run(const options& o, const benchmark_flags& flags, std::size_t available,
                  const std::vector<std::string>& skipped) {
  const hugepage::system_state sys = hugepage::read_system_state(/*probe=*/true);
  if (const std::optional<bool> format = flags.machine_readable_format()) print_context = *format;
  add_context("cpu_model", cpu_model());
  add_context("kernel", sys.kernel_release);
  add_context("thp_enabled", sys.thp.enabled.value_or("unreadable"));
  add_context("thp_defrag", sys.thp.defrag.value_or("unreadable"));
  add_context("thp_mode", sys.thp.pmd_mode ? hugepage::name_of(*sys.thp.pmd_mode) : "unreadable");
  add_context("madv_collapse", hugepage::name_of(sys.collapse));
  add_context("hugetlb_pools", describe_pools());
  add_context("mem_available_mib", std::to_string(available / mib));
  const std::string unavailable = describe_counters();
  add_context("counters_unavailable", unavailable.empty() ? "none" : unavailable);
  if (counters().kernel_excluded()) add_context("counters_scope", "user space only (paranoid)");
  add_context("counter_check", counter_check());
#if defined(HUGEPAGE_WITH_LIBPFM)
  add_context("walk_cycles_event", walk_cycles().available()
                                       ? walk_cycles().name()
                                       : "unavailable: " + walk_cycles().unavailable_reason());
#else
  add_context("walk_cycles_event", "not built (configure with -DHUGEPAGE_WITH_LIBPFM=ON)");
#endif
  const bool tails = std::any_of(o.suites.begin(), o.suites.end(), [](const suite_info* s) {
    return s->table.kind == table_kind::tail;
  });
  if (tails) {
    add_context("latency_timer",
                fmt::format("steady_clock, {:.0f} ns per pair of readings (median), subtracted "
                            "from every timed operation; {} operations per batch",
                            timer_cost_ns(), latency_batch));
  }
  for (const char* name : {"LD_PRELOAD", "MALLOC_CONF", "GLIBC_TUNABLES"}) {
    if (const char* value = std::getenv(name)) add_context(name, value);
  }
  for (char** env = environ; *env != nullptr; ++env) {
    if (std::strncmp(*env, "MIMALLOC_", 9) != 0) continue;
    const char* eq = std::strchr(*env, '=');
    if (eq != nullptr) add_context(std::string(*env, static_cast<std::size_t>(eq - *env)), eq + 1);
  }
  if (o.cpu) add_context("cpu_pinned", std::to_string(*o.cpu));
  // glibc raises its mmap threshold (up to 32 MiB) each time a mapped block is freed, after which
  // a freed 4-16 MiB block is reused from the heap, already faulted in: FaultIn and Bloat_Sparse
  // would then measure reuse, not first touch. A fixed threshold keeps every std block a fresh
  // mapping. (A preloaded allocator ignores this; its page_faults column shows what it did.)
  std::string fresh;
  for (const suite_info* s : o.suites) {
    if (s->run.fresh_blocks) fresh += (fresh.empty() ? "" : "/") + s->name;
  }
  if (!fresh.empty() && ::mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1) {
    add_context("glibc_mmap_threshold", "fixed at 128 KiB (" + fresh + " selected)");
  }
  std::string skipped_text;
  for (const std::string& s : skipped) skipped_text += (skipped_text.empty() ? "" : "; ") + s;
  add_context("skipped", skipped_text.empty() ? "none" : skipped_text);
  for (const std::string& s : skipped) fmt::print(stderr, "hugepage_bench: skipping {}\n", s);
}

// The rows with google-benchmark: under --paired one per suite and size (paired.cpp), else
// size-major, then allocator, then suite, so that rows sharing a cached container are neighbours.
void register_rows(const options& o, const std::vector<std::size_t>& sizes,
                   const std::vector<alloc_kind>& allocators) {
  if (o.paired) {
    add_context("paired", fmt::format("at least {} round(s), and more until {} s of rounds",
                                      o.pairing.rounds, o.pairing.round_seconds));
    std::vector<std::size_t> paired_sizes;
    for (const std::size_t size : sizes) {
      for (const suite_info* s : o.suites) {
        const auto& own = sizes_of(o, *s);
        if (std::find(own.begin(), own.end(), size) != own.end()) {
          paired_sizes.push_back(size);
          break;
        }
      }
    }
    register_paired(o.suites, paired_sizes, o.pairing);
    return;
  }
  for (const std::size_t size : sizes) {
    for (const alloc_kind k : allocators) {
      for (const suite_info* s : o.suites) {
        const auto& own = sizes_of(o, *s);
        if (!s->run.applies(k) || std::find(own.begin(), own.end(), size) == own.end()) continue;
        const bench_fn fn = s->run.function(k);
        const std::string name = fmt::format("BM_{}/{}/{}", s->name, token_of(k), size);
        auto* b = benchmark::RegisterBenchmark(name.c_str(),
                                               [fn, k, size, name](benchmark::State& state) {
                                                 current_row = name;
                                                 fn(state, k, size);
                                               });
        b->Unit(s->run.milliseconds ? benchmark::kMillisecond : benchmark::kNanosecond);
        if (s->run.milliseconds) b->UseRealTime();
        if (s->run.one_iteration) b->Iterations(1);
      }
    }
  }
}

int run_rows(benchmark_flags& flags) {
  benchmark::Initialize(&flags.count, flags.args.data());
  if (benchmark::ReportUnrecognizedArguments(flags.count, flags.args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  drop_cache();
  paired_built = {};
  return 0;
}

}  // namespace
}  // namespace hugepage_bench

int main(int argc, char** argv) {
  using namespace hugepage_bench;  // NOLINT(google-build-using-namespace): the program's own
  // --paired loads jemalloc, which needs static TLS sized at start-up: run again with it, before
  // the flags are taken out of argv.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--paired") == 0) ensure_static_tls(argv);
  }
  std::sort(registry().begin(), registry().end(), [](const suite_info& a, const suite_info& b) {
    return a.schedule.order < b.schedule.order;
  });
  options o = parse_flags(argc, argv);
  if (const std::optional<int> status = answer_without_running(o)) return *status;
  pin_to_cpu(o);
  benchmark_flags flags(argc, argv, o.quick);
  select_suites_and_allocators(o);

  const memory_room room = read_memory_room();
  const std::vector<planned_size> plan = plan_sizes(o, room);
  std::vector<std::size_t> sizes;
  std::vector<std::string> skipped;
  for (const planned_size& p : plan) {
    if (p.left_out.empty()) {
      sizes.push_back(p.size);
    } else {
      skipped.push_back(fmt::format("size {} ({})", size_token(p.size), p.left_out));
    }
  }
  std::vector<std::pair<std::string, std::string>> left_out;
  const std::vector<alloc_kind> allocators = allocators_that_run(o, left_out);
  for (const auto& [name, why] : left_out) skipped.push_back(fmt::format("{} ({})", name, why));
  if (o.plan) return print_plan_json(room, plan, left_out);

  describe_run(o, flags, room.mem_available, skipped);
  register_rows(o, sizes, allocators);
  return run_rows(flags);
}
