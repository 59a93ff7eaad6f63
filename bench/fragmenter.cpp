// bench/fragmenter.cpp - the fragmenter of fragmenter.hpp: its strict view of /proc/buddyinfo
// (over the library's parser), the child that splits the free blocks and holds every other base
// page, and its parent's side.
#include "fragmenter.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_memory.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/process_view.hpp"

namespace hugepage_bench {
namespace {

// How a process ended, from waitpid()'s status, in words.
std::string ended_text(int status) {
  char text[64];
  if (WIFEXITED(status)) {
    std::snprintf(text, sizeof text, "exited with status %d", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    if (name != nullptr) {
      std::snprintf(text, sizeof text, "was killed by SIG%s", name);
    } else {
      std::snprintf(text, sizeof text, "was killed by signal %d", WTERMSIG(status));
    }
  } else {
    std::snprintf(text, sizeof text, "ended with wait status %#x", static_cast<unsigned>(status));
  }
  return text;
}

using hugepage::units::kib;
using hugepage::units::mib;
// The child maps and touches this much at a time, then looks at /proc/buddyinfo again.
constexpr std::size_t chunk_bytes = 64 * mib;

// The text of /proc/buddyinfo (hugepage::read_buddyinfo_text()); throws when it cannot be read.
std::string buddyinfo_text() {
  std::optional<std::string> text = hugepage::read_buddyinfo_text();
  if (!text) {
    throw std::runtime_error(std::string("cannot read /proc/buddyinfo: ") + strerror(errno));
  }
  return std::move(*text);
}

std::size_t block_bytes(int order) { return std::size_t{4} * kib << order; }

std::string mib_text(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / mib);
  return buf;
}

std::size_t free_bytes(const buddy_zone& z) {
  std::size_t sum = 0;
  for (int o = 0; o < 11; ++o) sum += z.free_blocks[o] * block_bytes(o);
  return sum;
}

// Pages on the per-cpu free lists of every zone and CPU (/proc/zoneinfo "count:"); 0 when
// unreadable.
std::uint64_t per_cpu_free_pages() {
  const auto zones = hugepage::read_zoneinfo();
  return zones ? hugepage::per_cpu_free_pages(*zones) : 0;
}

// (compact_stall, thp_fault_alloc) of /proc/vmstat: event counters, summed over CPUs when read.
std::pair<std::uint64_t, std::uint64_t> thp_events() {
  const hugepage::kernel_values v = hugepage::read_vmstat().value_or(hugepage::kernel_values{});
  const auto get = [&v](const char* key) {
    const auto it = v.find(key);
    return it == v.end() ? std::uint64_t{0} : it->second;
  };
  return {get("compact_stall"), get("thp_fault_alloc")};
}

// ---- the child ----------------------------------------------------------------------------------

// What the child does. Splitting: chunk by chunk, it maps memory without THP and touches every
// base page, holding all of it (a page given back now would be the first the next fault gets: the
// buddy allocator serves the smallest free block first, so the large blocks would never be split),
// until no free block of order >= 9 is left or a limit is reached. Then it gives back the pages
// of odd frame number: their buddies, even, stay held, so none can merge. Without root the frame
// numbers read as 0 and the odd virtual pages are given back instead. Taking: whatever large
// blocks the limits left whole (kept free by keep_available_bytes, or in DMA32, which the kernel
// lends only when Normal runs low) it takes whole, one madvised THP fault each, only while
// buddyinfo still shows one (so these faults never compact). Sweeping: the 2 MiB pages on the
// per-cpu lists (sweep_per_cpu_lists), which costs one compaction per CPU.
class child_work {
 public:
  explicit child_work(const fragmenter::options& o)
      : opts_(o),
        page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))),
        end_(std::chrono::steady_clock::now() + o.deadline) {}

  std::string run() {
    // A limit or a failed mmap ends the splitting; the taking below says which limit stops it.
    while (free_blocks_at_least(user_zones(read_buddyinfo()), 9) != 0 &&
           at_limit(chunk_bytes) == nullptr && touch_chunk()) {
    }
    give_back();
    const char* limit = nullptr;
    std::uint64_t best = UINT64_MAX, idle = 0;
    for (;;) {
      const std::uint64_t big = free_blocks_at_least(user_zones(read_buddyinfo()), 9);
      if (big == 0) break;
      if ((limit = at_limit(huge_bytes)) != nullptr) return limit;
      // A THP fault takes from this CPU's per-cpu list first (up to its pages / 512 faults, which
      // buddyinfo does not show); another process may take or free blocks meanwhile.
      idle = big < best ? 0 : idle + 1;
      best = std::min(best, big);
      if (idle > 64 + per_cpu_free_pages() / 512) return "no progress";
      if (!take_block()) return "mmap failed";
    }
    if ((limit = sweep_per_cpu_lists()) != nullptr) return limit;
    return free_blocks_at_least(user_zones(read_buddyinfo()), 9) == 0 ? "complete" : "no progress";
  }

  std::size_t held() const { return held_; }
  std::size_t freed() const { return freed_; }
  std::size_t taken() const { return taken_; }
  std::size_t from_per_cpu() const { return from_per_cpu_; }

 private:
  struct region {
    char* p;
    std::size_t len;
  };

  static constexpr std::size_t huge_bytes = 2 * mib;

  const char* at_limit(std::size_t more) const {
    if (std::chrono::steady_clock::now() >= end_) return "deadline";
    if (mem_available_bytes() < opts_.keep_available_bytes + more) return "keep_available_bytes";
    if (held_ + more > opts_.max_hold_bytes) return "max_hold_bytes";
    return nullptr;
  }

  // The per-cpu free lists may hold 2 MiB pages that buddyinfo does not show (freed THPs; on the
  // 2-core VM the lists of one CPU held 900 MiB): a THP fault on that CPU would get one without
  // compaction. So, on every CPU it may run on, the child takes THPs while the kernel serves them
  // without a compaction stall; the first fault that stalls (or falls back) shows that CPU's lists
  // hold none (that one 2 MiB block is compacted from the freed pages, once per CPU).
  const char* sweep_per_cpu_lists() {
    cpu_set_t allowed;
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return nullptr;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (::sched_setaffinity(0, sizeof one, &one) != 0) continue;
      for (;;) {
        if (const char* limit = at_limit(huge_bytes)) {
          (void)::sched_setaffinity(0, sizeof allowed, &allowed);
          return limit;
        }
        const auto before = thp_events();
        if (!take_block()) return "mmap failed";
        const auto after = thp_events();
        if (after.first != before.first || after.second == before.second) break;
        from_per_cpu_ += huge_bytes;
      }
    }
    (void)::sched_setaffinity(0, sizeof allowed, &allowed);
    return nullptr;
  }

  // One madvised THP fault in a 2 MiB-aligned slot of a region reserved for them.
  bool take_block() {
    if (slot_ == slots_end_) {
      constexpr std::size_t slots_bytes = 512 * mib;
      void* p = ::mmap(nullptr, slots_bytes + huge_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) return false;
      slot_ = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(p) + huge_bytes - 1) &
                                      ~std::uintptr_t{huge_bytes - 1});
      slots_end_ = slot_ + slots_bytes;
      (void)::madvise(slot_, slots_bytes, MADV_HUGEPAGE);
    }
    *static_cast<volatile char*>(slot_) = 1;
    slot_ += huge_bytes;
    held_ += huge_bytes;
    taken_ += huge_bytes;
    return true;
  }

  bool touch_chunk() {
    void* p = ::mmap(nullptr, chunk_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    (void)::madvise(p, chunk_bytes, MADV_NOHUGEPAGE);
    auto* bytes = static_cast<volatile char*>(p);
    for (std::size_t off = 0; off < chunk_bytes; off += page_) bytes[off] = 1;
    pending_.push_back({static_cast<char*>(p), chunk_bytes});
    held_ += chunk_bytes;
    return true;
  }

  // Gives back the odd frames of every region touched since the last call.
  void give_back() {
    std::vector<std::uint64_t> entries;
    for (const region& r : pending_) {
      const std::size_t pages = r.len / page_;
      entries.assign(pages, 0);
      const off_t at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(r.p) / page_ * 8);
      const int pagemap = self_.pagemap_fd();
      if (pagemap < 0 ||
          ::pread(pagemap, entries.data(), pages * 8, at) != static_cast<ssize_t>(pages * 8)) {
        std::fill(entries.begin(), entries.end(), 0);
      }
      std::size_t run_start = 0, run_len = 0;
      const auto flush = [&] {
        if (run_len == 0) return;
        (void)::madvise(r.p + run_start * page_, run_len * page_, MADV_DONTNEED);
        freed_ += run_len * page_;
        held_ -= run_len * page_;
        run_len = 0;
      };
      for (std::size_t i = 0; i < pages; ++i) {
        const std::uint64_t pfn = entries[i] & ((std::uint64_t{1} << 55) - 1);
        const bool give = pfn != 0 ? (pfn & 1) != 0 : (i & 1) != 0;
        if (!give) {
          flush();
          continue;
        }
        if (run_len == 0) run_start = i;
        ++run_len;
      }
      flush();
    }
    pending_.clear();
  }

  fragmenter::options opts_;
  std::size_t page_;
  std::chrono::steady_clock::time_point end_;
  hugepage::process_view self_;  // made in the child: its own pagemap
  std::vector<region> pending_;
  char* slot_ = nullptr;
  char* slots_end_ = nullptr;
  std::size_t held_ = 0, freed_ = 0, taken_ = 0, from_per_cpu_ = 0;
};

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

[[noreturn]] void child_main(int fd, pid_t parent, const fragmenter::options& opts) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(0);  // the parent died before the line above
  // Under memory pressure the OOM killer takes this process first, not a neighbour's.
  if (const int adj = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); adj >= 0) {
    (void)!::write(adj, "1000", 4);
    ::close(adj);
  }
  std::string report;
  try {
    child_work work(opts);
    const std::string reason = work.run();
    report = "held " + std::to_string(work.held()) + "\nfreed " + std::to_string(work.freed()) +
             "\ntaken " + std::to_string(work.taken()) + "\nper_cpu " +
             std::to_string(work.from_per_cpu()) + "\nreason " + reason + "\n" + buddyinfo_text();
  } catch (const std::exception& e) {
    report = std::string("error ") + e.what() + "\n";
  }
  write_all(fd, report);
  ::close(fd);
  for (;;) ::pause();  // holds the memory until killed
}

std::string read_until_eof(int fd, std::chrono::steady_clock::time_point until) {
  std::string text;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("fragmenter: the child did not report in time");
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
  }
}

// "key value\n" at the front of `text`; advances it.
std::string take_field(std::string_view& text, std::string_view key) {
  const std::size_t eol = text.find('\n');
  const std::string_view line = text.substr(0, eol);
  if (eol == std::string_view::npos || line.substr(0, key.size() + 1) != std::string(key) + " ") {
    throw std::runtime_error("fragmenter: the child's report lacks '" + std::string(key) + "'");
  }
  text.remove_prefix(eol + 1);
  return std::string(line.substr(key.size() + 1));
}

}  // namespace

std::vector<buddy_zone> parse_buddyinfo(std::string_view text) {
  std::vector<buddy_zone> zones;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_no;
    const auto bad = [&](const std::string& why) {
      return std::invalid_argument("buddyinfo line " + std::to_string(line_no) + ": " + why +
                                   ": '" + std::string(line) + "'");
    };
    // The library's parser reads the line; the fragmenter wants counts, at most 11 orders.
    std::string why;
    const std::optional<hugepage::buddy_zone> zone = hugepage::parse_buddyinfo_line(line, &why);
    if (!zone && why.empty()) continue;  // a blank line
    if (!zone) throw bad(why);
    if (zone->free_blocks.empty()) throw bad("not 'Node N, zone NAME' and counts");
    if (zone->free_blocks.size() > 11) throw bad("more than 11 orders");
    buddy_zone z;
    z.node_zone = std::to_string(zone->node) + "/" + zone->zone;
    std::copy(zone->free_blocks.begin(), zone->free_blocks.end(), z.free_blocks.begin());
    zones.push_back(std::move(z));
  }
  if (zones.empty()) throw std::invalid_argument("buddyinfo: no zone");
  return zones;
}

std::vector<buddy_zone> read_buddyinfo() { return parse_buddyinfo(buddyinfo_text()); }

std::uint64_t free_blocks_at_least(const std::vector<buddy_zone>& zones, int order) {
  std::uint64_t sum = 0;
  for (const buddy_zone& z : zones) {
    for (int o = std::max(order, 0); o < 11; ++o) sum += z.free_blocks[o];
  }
  return sum;
}

std::vector<buddy_zone> user_zones(const std::vector<buddy_zone>& zones) {
  std::vector<buddy_zone> out;
  for (const buddy_zone& z : zones) {
    const std::size_t slash = z.node_zone.find('/');
    if (z.node_zone.compare(slash + 1, std::string::npos, "DMA") != 0) out.push_back(z);
  }
  return out;
}

std::size_t mem_available_bytes() {
  return static_cast<std::size_t>(hugepage::read_meminfo_value("MemAvailable").value_or(0));
}

namespace {
constexpr const char* proactiveness_path = "/proc/sys/vm/compaction_proactiveness";

bool write_text(const char* path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}
}  // namespace

fragmenter::fragmenter(options opts) : before_(read_buddyinfo()) {
  if (opts.pause_proactive_compaction && ::geteuid() == 0) {
    std::ifstream in(proactiveness_path);
    int value = -1;
    if (in >> value && value >= 0 && write_text(proactiveness_path, "0")) {
      saved_proactiveness_ = value;
    }
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    stop_child();
    throw std::runtime_error(std::string("fragmenter: pipe: ") + strerror(errno));
  }
  const pid_t parent = ::getpid();
  const auto start = std::chrono::steady_clock::now();
  child_ = ::fork();
  if (child_ < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    stop_child();
    throw std::runtime_error(std::string("fragmenter: fork: ") + strerror(errno));
  }
  if (child_ == 0) {
    ::close(fds[0]);
    child_main(fds[1], parent, opts);
  }
  ::close(fds[1]);
  std::string text;
  try {
    text = read_until_eof(fds[0], start + opts.deadline + std::chrono::seconds(30));
  } catch (...) {
    ::close(fds[0]);
    stop_child();
    throw;
  }
  ::close(fds[0]);
  took_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                start);
  try {
    std::string_view rest = text;
    if (rest.substr(0, 6) == "error ") throw std::runtime_error("fragmenter: " + text);
    if (rest.empty()) {
      int status = 0;
      std::string how = "died";
      if (::waitpid(child_, &status, 0) == child_) {
        child_ = -1;
        how = ended_text(status);
      }
      throw std::runtime_error("fragmenter: the child " + how + " before it reported");
    }
    held_ = std::stoull(take_field(rest, "held"));
    freed_ = std::stoull(take_field(rest, "freed"));
    taken_ = std::stoull(take_field(rest, "taken"));
    from_per_cpu_ = std::stoull(take_field(rest, "per_cpu"));
    reason_ = take_field(rest, "reason");
    after_ = parse_buddyinfo(rest);
  } catch (...) {
    stop_child();
    throw;
  }
}

fragmenter::~fragmenter() { stop_child(); }

std::string fragmenter::child_ended() {
  if (child_ <= 0) return "was never started, or was stopped";
  int status = 0;
  const pid_t r = ::waitpid(child_, &status, WNOHANG);
  if (r == 0) return "";
  if (r < 0) return std::string("cannot be waited for: ") + strerror(errno);
  child_ = -1;
  return ended_text(status);
}

void fragmenter::stop_child() noexcept {
  if (child_ > 0) {
    ::kill(child_, SIGKILL);
    int status = 0;
    while (::waitpid(child_, &status, 0) < 0 && errno == EINTR) {
    }
    child_ = -1;
  }
  if (saved_proactiveness_ >= 0) {
    (void)write_text(proactiveness_path, std::to_string(saved_proactiveness_));
    saved_proactiveness_ = -1;
  }
}

bool fragmenter::complete() const {
  return !after_.empty() && free_blocks_at_least(user_zones(after_), 9) == 0;
}

std::string fragmenter::summary() const {
  std::ostringstream out;
  char line[160];
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(took_.count()) / 1000);
  out << "fragmenter: child " << child_ << " holds " << mib_text(held_) << " (" << mib_text(taken_)
      << " of it as whole 2 MiB blocks, " << mib_text(from_per_cpu_)
      << " of those from per-cpu lists; gave back " << mib_text(freed_)
      << " as single pages) after " << seconds << " s; stopped: " << reason_ << "\n";
  if (saved_proactiveness_ >= 0) {
    out << "  compaction_proactiveness 0 while held (was " << saved_proactiveness_ << ")\n";
  }
  out << "  zone            blocks >= 2 MiB  before -> after    free  before -> after\n";
  for (const buddy_zone& b : before_) {
    const buddy_zone* a = nullptr;
    for (const buddy_zone& z : after_) {
      if (z.node_zone == b.node_zone) a = &z;
    }
    const std::vector<buddy_zone> one{b};
    const std::uint64_t big_after = a != nullptr ? free_blocks_at_least({*a}, 9) : 0;
    std::snprintf(line, sizeof line, "  %-14s  %22llu -> %-8llu %12s -> %s\n", b.node_zone.c_str(),
                  static_cast<unsigned long long>(free_blocks_at_least(one, 9)),
                  static_cast<unsigned long long>(big_after), mib_text(free_bytes(b)).c_str(),
                  a != nullptr ? mib_text(free_bytes(*a)).c_str() : "?");
    out << line;
  }
  return out.str();
}

std::shared_ptr<fragmenter> fragmented_machine(const fragmenter::options& opts, std::string& why,
                                               bool& failed) {
  failed = false;
  try {
    auto f = std::make_shared<fragmenter>(opts);
    std::fprintf(stderr, "%s\n", f->summary().c_str());
    // "no progress": the blocks left (a few dozen in DMA32 here) were not given to 64 and more
    // madvised THP faults in a row, which is what a THP fault of the scenario meets too.
    if (f->complete() || f->stopped_by() == "no progress") return f;
    why = "not fragmented: " + f->summary();
  } catch (const std::exception& e) {
    why = e.what();
    failed = true;  // the helper did not do its work (it died, or could not be started)
  }
  return nullptr;
}

}  // namespace hugepage_bench
