// hugepage_fragment: fragments this machine's free memory (fragmenter.hpp), prints the free
// blocks before and after, and holds the memory until SIGINT or SIGTERM (or, with --exit, gives it
// back at once). --probe-fault=SIZE times a madvised THP fault of SIZE before fragmenting and
// after, with the compaction counters of /proc/vmstat around each: the numbers of
// docs/benchmark.md's "A fragmented machine". For manual experiments and for scenarios that need
// such a machine.
#include <signal.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "fragmenter.hpp"
#include "hugepage/kernel_counters.hpp"

namespace {

using hugepage_bench::fragmenter;

constexpr const char* usage =
    "usage: hugepage_fragment [--keep-available=SIZE] [--max-hold=SIZE] [--deadline=SECONDS]\n"
    "                         [--probe-fault=SIZE] [--exit]\n"
    "  Fragments free memory until no zone has a free block of 2 MiB or more (or a limit), prints\n"
    "  the free blocks before and after, then holds the memory until SIGINT/SIGTERM.\n"
    "  --keep-available  MemAvailable never below this (default 2G)\n"
    "  --max-hold        the most the holding child has resident at any time (default 16G)\n"
    "  --deadline        seconds to stop after (default 120)\n"
    "  --probe-fault     time a madvised THP fault of SIZE before and after, with compact_stall\n"
    "  --exit            give the memory back at once instead of holding it\n"
    "  SIZE: digits with an optional K, M or G (binary units), e.g. 512M\n"
    "  exit status: 0 no free 2 MiB block left, 3 a limit stopped it first, 2 bad arguments,\n"
    "  1 the fragmenter failed\n";

std::size_t parse_size(const std::string& flag, const std::string& text) {
  std::size_t i = 0;
  unsigned long long value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && value < (1ULL << 50)) {
    value = value * 10 + static_cast<unsigned>(text[i++] - '0');
  }
  int shift = 0;
  if (i + 1 == text.size()) {
    const char unit = text[i++];
    shift = unit == 'K' || unit == 'k'   ? 10
            : unit == 'M' || unit == 'm' ? 20
            : unit == 'G' || unit == 'g' ? 30
                                         : -1;
  }
  if (i == 0 || i != text.size() || shift < 0 || value == 0 || value >= (1ULL << 50)) {
    throw std::invalid_argument(flag + ": bad size '" + text + "' (e.g. 512M, 2G)");
  }
  return static_cast<std::size_t>(value << shift);
}

// /proc/vmstat (hugepage::read_vmstat()); empty when unreadable.
hugepage::kernel_values vmstat() {
  return hugepage::read_vmstat().value_or(hugepage::kernel_values{});
}

// Maps `bytes`, madvise(MADV_HUGEPAGE), touches one byte per 4 KiB; prints the time and what the
// kernel counted meanwhile (THP faults served and failed, direct compactions).
void probe_fault(const char* when, std::size_t bytes) {
  const auto before = vmstat();
  const auto t0 = std::chrono::steady_clock::now();
  void* p = ::mmap(nullptr, bytes + (2 << 20), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + strerror(errno));
  auto* base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(p) + (2 << 20) - 1) &
                                       ~std::uintptr_t{(2 << 20) - 1});
  (void)::madvise(base, bytes, MADV_HUGEPAGE);
  for (std::size_t off = 0; off < bytes; off += 4096) static_cast<volatile char*>(base)[off] = 1;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto after = vmstat();
  ::munmap(p, bytes + (2 << 20));
  const auto delta = [&](const char* k) {
    return static_cast<unsigned long long>(after[k] - before.at(k));
  };
  std::printf(
      "probe %s: %zu MiB THP fault in %.1f ms: thp_fault_alloc +%llu, thp_fault_fallback +%llu, "
      "compact_stall +%llu, compact_success +%llu, compact_fail +%llu\n",
      when, bytes >> 20, ms, delta("thp_fault_alloc"), delta("thp_fault_fallback"),
      delta("compact_stall"), delta("compact_success"), delta("compact_fail"));
}

int run(int argc, char** argv) {
  fragmenter::options opts;
  std::size_t probe = 0;
  bool hold = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (arg == "-h" || arg == "--help") {
      std::fputs(usage, stdout);
      return 0;
    } else if (arg == "--exit") {
      hold = false;
    } else if (name == "--keep-available" && eq != std::string::npos) {
      opts.keep_available_bytes = parse_size(name, value);
    } else if (name == "--max-hold" && eq != std::string::npos) {
      opts.max_hold_bytes = parse_size(name, value);
    } else if (name == "--probe-fault" && eq != std::string::npos) {
      probe = parse_size(name, value);
    } else if (name == "--deadline" && eq != std::string::npos) {
      const std::size_t seconds = parse_size(name, value);
      if (seconds > 86400 || value.find_first_not_of("0123456789") != std::string::npos) {
        throw std::invalid_argument("--deadline: 1 to 86400 seconds, not '" + value + "'");
      }
      opts.deadline = std::chrono::seconds(seconds);
    } else {
      throw std::invalid_argument("unknown argument '" + arg + "'");
    }
  }
  // Blocked before the child is forked, so that a signal waits for sigwait below.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  if (probe != 0) probe_fault("unfragmented", probe);
  fragmenter f(opts);
  std::fputs(f.summary().c_str(), stdout);
  if (probe != 0) probe_fault("fragmented", probe);
  if (hold) {
    std::printf("holding (child %d); SIGINT or SIGTERM gives the memory back\n",
                static_cast<int>(f.child()));
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
  }
  return f.complete() ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "hugepage_fragment: %s\n%s", e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hugepage_fragment: %s\n", e.what());
    return 1;
  }
}
