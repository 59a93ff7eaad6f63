// bench/scenario_fork_snapshot.cpp - scenario 4: a service that forks snapshots of its table.
//
// The fare table (scenario_fares.hpp) serves 100,000 requests a second open loop, one in twenty
// an update in place, while another thread forks a child that reads the table for a while and
// exits, a few times over. Every write the parent makes to a huge page it shares with the child
// splits that page (copy-on-write copies 4 KiB; on hugetlb pages it copies the whole page), so a
// THP table decays while the child lives. A sampler reads the table's coverage (backing_of)
// every 50 ms. Per row: the lowest coverage, and for each child the time from its exit to the
// first sample at >= 99% huge (a child after which the table was not back before the next fork,
// or the end, counts the whole wait: unrecovered_cycles says how many). The requests before the
// first fork are the row's unforked run (unforked_p999_ns); the lat_ figures are those from the
// first fork on, and p999_over_unforked compares the two.
//
// Each child is the snapshot: it walks the whole table, counting the routes and summing their
// keys (which updates never change), then reads random routes until its time is up, and reports
// on a pipe. The parent compares the count and the sum with what it built, and reads how the
// child ended: a child killed (a SIGBUS from a hugetlb copy-on-write the pool could not serve) or
// with a wrong count fails the row (fail_row), whatever the loop's latency was.
//
// Rows: std (glibc; the peers run it under their configurations: none has an upkeep), collapse
// (ours: a labelled collapse_allocator and an upkeep_thread with a tail budget, held by the
// forking thread while a child lives, docs/upkeep.md), thp (ours without upkeep: thp_allocator,
// left to khugepaged), hugetlb_2m (ours on the 2 MiB pool, with free pool pages for a copy of the
// whole table). Scenario_ForkPoolShort: the pool row with no free page left for the
// copies.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "registry.hpp"
#include "scenario_engine.hpp"
#include "scenario_fares.hpp"

namespace hugepage_bench {
namespace {

struct snapshot_options : hugepage::default_options {
  static constexpr const char* label = "scenario_fork_snapshot";
};
using snapshot_collapse_bytes = hugepage::collapse_allocator<byte, snapshot_options>;

constexpr double snapshot_rate = 100'000.0;
constexpr u64 snapshot_update_every = 20;
constexpr double recovered_pct = 99.0;
// What the service can spare for upkeep: 10 ms of collapse work in every 40 ms (a quarter of one
// CPU), spread over the interval, and none while a child shares the table.
constexpr hugepage::tail_budget snapshot_tail{std::chrono::milliseconds(10),
                                              std::chrono::milliseconds(40)};

struct fork_plan {
  std::chrono::milliseconds lead, child, gap;  // before the first fork; a child's life; after it
  int cycles;
};

fork_plan plan_for(std::size_t working_set) {
  if (working_set < gib) {  // --quick and reduced runs: seconds
    return {std::chrono::milliseconds(1000), std::chrono::milliseconds(300),
            std::chrono::milliseconds(2000), 2};
  }
  return {std::chrono::milliseconds(2000), std::chrono::milliseconds(3000),
          std::chrono::milliseconds(5000), 4};
}

/// What a child reports: the routes its walk found, the sum of their keys, the random reads made.
struct child_work {
  u64 routes = 0, key_sum = 0, reads = 0;
};

// Writes `w` as three decimal numbers and a newline, without the C library's formatting (the
// parent has other threads: nothing that may take a lock runs in the child).
void write_report(int fd, const child_work& w) {
  char text[80];
  std::size_t n = 0;
  for (const u64 v : {w.routes, w.key_sum, w.reads}) {
    char digits[24];
    std::size_t k = 0;
    u64 x = v;
    do {
      digits[k++] = static_cast<char>('0' + x % 10);
      x /= 10;
    } while (x != 0);
    while (k != 0) text[n++] = digits[--k];
    text[n++] = ' ';
  }
  text[n - 1] = '\n';
  for (std::size_t done = 0; done < n;) {
    const ssize_t w2 = ::write(fd, text + done, n - done);
    if (w2 < 0 && errno == EINTR) continue;
    if (w2 <= 0) break;
    done += static_cast<std::size_t>(w2);
  }
}

// In the child: walks the table (the snapshot), reads random routes until `life` has passed,
// raises the injected signal if any, reports on `fd` and exits.
template <class Map>
[[noreturn]] void child_reads(const Map& m, u64 routes, std::chrono::milliseconds life, int fd,
                              int inject) {
  const auto end = std::chrono::steady_clock::now() + life;
  child_work w;
  for (const auto& [key, value] : m) {
    ++w.routes;
    w.key_sum += key;
    benchmark::DoNotOptimize(value.cents);
  }
  u64 sum = 0;
  for (u64 j = 0; std::chrono::steady_clock::now() < end; ++j) {
    for (int k = 0; k < 256; ++k) {
      const auto it = m.find(key_of(index_of(j * 256 + static_cast<u64>(k), routes)));
      if (it != m.end()) sum += it->second.cents;
      ++w.reads;
    }
  }
  benchmark::DoNotOptimize(sum);
  raise_in_child(inject);
  write_report(fd, w);
  ::_exit(0);
}

struct fork_record {
  std::vector<double> fork_ms, exit_ms;  // since the sampler started
  std::vector<std::string> failures;     // per child that did not do its work: why
  u64 reads = 0;                         // the children's random reads, all together
  std::string error;                     // fork or pipe failed: no child
};

// Reads what the child wrote on `fd` until end of file.
std::string read_all(int fd) {
  std::string text;
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

// What went wrong with child `c` (1-based), or "" when it exited 0 having walked every route.
std::string judge_child(int c, int status, const std::string& report, u64 routes, u64 key_sum) {
  child_work w;
  const bool parsed = std::sscanf(report.c_str(), "%llu %llu %llu",
                                  reinterpret_cast<unsigned long long*>(&w.routes),
                                  reinterpret_cast<unsigned long long*>(&w.key_sum),
                                  reinterpret_cast<unsigned long long*>(&w.reads)) == 3;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return fmt::format("child {} {}{}", c, wait_status_text(status),
                       parsed ? "" : " before it reported");
  }
  if (!parsed) return fmt::format("child {} exited 0 without its report", c);
  if (w.routes != routes || w.key_sum != key_sum) {
    return fmt::format("child {} read {} routes (key sum {:#x}), the table holds {} ({:#x})", c,
                       w.routes, w.key_sum, routes, key_sum);
  }
  return "";
}

// Forks plan.cycles children, one at a time. `hold` (may be empty) is called before each fork and
// returns what releases it, destroyed when the child is reaped: the service telling upkeep that a
// child shares the pages.
// `child_alive` is set from just before each fork until the child is reaped: the request loop
// tells its requests apart by it.
template <class Map, class Hold>
void fork_cycles(const Map& m, u64 routes, u64 key_sum, const fork_plan& plan,
                 std::chrono::steady_clock::time_point origin, Hold&& hold,
                 std::atomic<bool>& child_alive, fork_record& out) {
  const int inject = injected_child_signal();
  std::this_thread::sleep_for(plan.lead);
  for (int c = 1; c <= plan.cycles; ++c) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      out.error = fmt::format("pipe: {}", std::strerror(errno));
      return;
    }
    auto held = hold();
    out.fork_ms.push_back(ms_since(origin));
    child_alive.store(true, std::memory_order_relaxed);
    const pid_t child = ::fork();
    if (child < 0) {
      child_alive.store(false, std::memory_order_relaxed);
      out.error = fmt::format("fork: {}", std::strerror(errno));
      out.fork_ms.pop_back();
      ::close(fds[0]);
      ::close(fds[1]);
      return;
    }
    if (child == 0) {
      ::close(fds[0]);
      child_reads(m, routes, plan.child, fds[1], inject);
    }
    ::close(fds[1]);
    const std::string report = read_all(fds[0]);
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    out.exit_ms.push_back(ms_since(origin));
    child_alive.store(false, std::memory_order_relaxed);
    held = {};
    child_work w;
    if (std::sscanf(report.c_str(), "%*u %*u %llu",
                    reinterpret_cast<unsigned long long*>(&w.reads)) == 1) {
      out.reads += w.reads;
    }
    if (std::string why = judge_child(c, status, report, routes, key_sum); !why.empty()) {
      out.failures.push_back(std::move(why));
    }
    std::this_thread::sleep_for(plan.gap);
  }
}

struct recovery {
  double worst_ms = 0;
  int unrecovered = 0;
};

// For each child: from its exit to the first sample at >= 99% before the next fork (or the end).
recovery recovery_of(const std::vector<sample>& samples, const fork_record& r) {
  recovery out;
  const double end = samples.empty() ? 0 : samples.back().at_ms;
  for (std::size_t k = 0; k < r.exit_ms.size(); ++k) {
    const double exit = r.exit_ms[k];
    const double until = k + 1 < r.fork_ms.size() ? r.fork_ms[k + 1] : end;
    const auto back = std::find_if(samples.begin(), samples.end(), [&](const sample& s) {
      return s.at_ms >= exit && s.at_ms <= until && s.coverage_pct >= recovered_pct;
    });
    if (back == samples.end()) {
      ++out.unrecovered;
      out.worst_ms = std::max(out.worst_ms, until - exit);
    } else {
      out.worst_ms = std::max(out.worst_ms, back->at_ms - exit);
    }
  }
  return out;
}

// What the row does around its table.
enum class keeping {
  none,        // nothing: the table decays (or never splits, on hugetlb)
  upkeep,      // an upkeep_thread with snapshot_tail, held while a child lives
  pool_short,  // on the pool, every other free pool page reserved while the children live
};

// Reserves (without touching) every 2 MiB pool page still available, so that a copy-on-write of
// a shared hugetlb page finds none. Unmapped at destruction.
class pool_drain {
 public:
  pool_drain() {
    const auto pool = hugepage::read_pool(hugepage::page_size::huge_2m);
    u64 pages = pool ? pool->available().value_or(0) : 0;
    while (pages > 0) {
      void* p = ::mmap(nullptr, pages * 2 * mib, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
      if (p != MAP_FAILED) {
        p_ = p;
        bytes_ = pages * 2 * mib;
        break;
      }
      --pages;  // another process took one meanwhile
    }
  }
  pool_drain(const pool_drain&) = delete;
  pool_drain& operator=(const pool_drain&) = delete;
  ~pool_drain() {
    if (p_ != nullptr) ::munmap(p_, bytes_);
  }
  u64 pages() const { return bytes_ / (2 * mib); }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

template <class Inner>
void run_snapshots(benchmark::State& state, std::size_t working_set, keeping keep) {
  const u64 routes = routes_for(working_set);
  scenario_figures f;
  auto m = build_fares<Inner>(routes, f.startup_ms);
  u64 key_sum = 0;
  for (u64 i = 0; i < routes; ++i) key_sum += key_of(i);
  const block_record table = largest_block;
  std::optional<hugepage::upkeep_thread> keeper;
  if (keep == keeping::upkeep) keeper.emplace(snapshot_tail);
  std::optional<pool_drain> drain;
  if (keep == keeping::pool_short) drain.emplace();
  const auto pool_left = [] {
    const auto pool = hugepage::read_pool(hugepage::page_size::huge_2m);
    return pool ? static_cast<double>(pool->available().value_or(0)) : -1.0;
  };
  const double pool_free_at_fork = pool_left();
  const hugepage::upkeep_statistics upkeep_before = hugepage::upkeep_stats();
  const fork_plan plan = plan_for(working_set);
  const auto total = plan.lead + plan.cycles * (plan.child + plan.gap);
  reset_peak_rss();
  begin_kernel_counts(f);
  fork_record forks;
  std::atomic<bool> child_alive{false};
  {
    sampler s(std::chrono::milliseconds(50), [table] { return table_coverage(table); });
    f.sampled_from = s.start();
    std::thread forker([&] {
      const auto hold = [&keeper] {
        return keeper ? std::optional<hugepage::upkeep_hold>(keeper->hold()) : std::nullopt;
      };
      fork_cycles(*m, routes, key_sum, plan, s.start(), hold, child_alive, forks);
    });
    u64 sum = 0;
    const auto unforked =
        static_cast<u64>(snapshot_rate * std::chrono::duration<double>(plan.lead).count());
    f.loop = run_open_loop(
        snapshot_rate, total,
        [&](u64 i) { sum += fare_request(*m, routes, i, snapshot_update_every); }, unforked,
        &child_alive);
    benchmark::DoNotOptimize(sum);
    forker.join();
    s.stop();
    f.samples = s.samples();
  }
  end_kernel_counts(f);
  drain.reset();
  if (!forks.error.empty()) {
    fail_row(state, forks.error);
    return;
  }
  if (!forks.failures.empty()) {
    std::string why = fmt::format("{} of {} children did not do their work:", forks.failures.size(),
                                  forks.exit_ms.size());
    for (const std::string& x : forks.failures) why += " " + x + ";";
    if (keep == keeping::pool_short) {
      why += fmt::format(" the 2 MiB pool had {} free page(s) for the copies", pool_free_at_fork);
    }
    fail_row(state, why);
    return;
  }
  f.live_bytes = m->capacity() * fare_slot_bytes;
  f.huge_pct = table_coverage(table);
  for (std::size_t c = 0; c < forks.exit_ms.size(); ++c) {
    f.busy.push_back({forks.fork_ms[c], forks.exit_ms[c]});  // the children's lives
  }
  report_scenario(state, f);
  double lowest = 100;
  std::string series;
  for (const sample& x : f.samples) {
    lowest = std::min(lowest, x.coverage_pct);
    series += fmt::format(" {:.0f}:{:.0f}", x.at_ms, x.coverage_pct);
  }
  const recovery r = recovery_of(f.samples, forks);
  const double unforked_p999 = f.loop.first.quantile(0.999);
  state.counters["unforked_p999_ns"] = unforked_p999;
  if (unforked_p999 > 0) {
    state.counters["p999_over_unforked"] = f.loop.latency.quantile(0.999) / unforked_p999;
    // The same from the first fork on, in three phases: while a child lives (fork, copy-on-write,
    // the child's walk beside the loop; upkeep is held), catching up after its exit (the backlog
    // it left, with whatever else runs meanwhile: upkeep is no longer held), and after that
    // (upkeep restoring the table, where the row has it).
    state.counters["p999_child_alive_over_unforked"] =
        f.loop.flag_set.quantile(0.999) / unforked_p999;
    state.counters["p999_catch_up_over_unforked"] = f.loop.catch_up.quantile(0.999) / unforked_p999;
    state.counters["p999_no_child_over_unforked"] =
        f.loop.flag_clear.quantile(0.999) / unforked_p999;
  }
  state.counters["catch_up_requests"] = static_cast<double>(f.loop.catch_up.count());
  state.counters["fork_cycles"] = static_cast<double>(forks.exit_ms.size());
  state.counters["children_ok"] = static_cast<double>(forks.exit_ms.size() - forks.failures.size());
  state.counters["child_reads"] = static_cast<double>(forks.reads);
  state.counters["pool_free_at_fork"] = pool_free_at_fork;
  state.counters["min_coverage_pct"] = lowest;
  state.counters["start_coverage_pct"] = f.samples.empty() ? -1 : f.samples.front().coverage_pct;
  state.counters["recovery_ms_max"] = r.worst_ms;
  state.counters["unrecovered_cycles"] = r.unrecovered;
  if (keep == keeping::upkeep) {  // what the upkeep thread's calls did (process-wide, upkeep.hpp)
    const hugepage::upkeep_statistics u = hugepage::upkeep_stats();
    state.counters["upkeep_calls"] = static_cast<double>(u.calls - upkeep_before.calls);
    state.counters["upkeep_restored_mib"] =
        static_cast<double>(u.restored_bytes - upkeep_before.restored_bytes) / mib;
    state.counters["upkeep_refused_chunks"] =
        static_cast<double>(u.refused_chunks - upkeep_before.refused_chunks);
    state.counters["upkeep_backed_off_calls"] =
        static_cast<double>(u.backed_off - upkeep_before.backed_off);
    state.counters["upkeep_held_calls"] = static_cast<double>(u.held - upkeep_before.held);
  }
  // The series for the log (ms:percent), as a reader of the console output wants it.
  fmt::print(stderr, "Scenario_ForkSnapshot ({}): table coverage over time (ms:%):{}\n",
             working_set, series);
}

// The 2 MiB pool pages the table needs, and with a copy of every page (the parent's writes while
// a child lives copy each page they touch).
u64 table_pages(std::size_t working_set) {
  return (fare_array_bytes(routes_for(working_set)) + 2 * mib - 1) / (2 * mib);
}

std::string pool_shortage(u64 pages) {
  const auto pool = hugepage::read_pool(hugepage::page_size::huge_2m);
  const u64 free = pool ? pool->available().value_or(0) : 0;
  return free >= pages
             ? std::string()
             : fmt::format("the 2 MiB pool has {} free page(s), this row needs {}", free, pages);
}

template <bool PoolShort>
void fork_snapshot(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  drop_cache();
  if (const std::string why = shortage(alloc_kind::std_alloc, working_set * 2); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  if (k == alloc_kind::hugetlb_2m) {
    // With headroom: the table and a copy of each of its pages. Short: the table only (the rest
    // of the pool is reserved away once it is built).
    const u64 pages = table_pages(working_set) * (PoolShort ? 1 : 2) + 2;
    if (const std::string why = pool_shortage(pages); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
  }
  for (auto _ : state) {
    try {
      if (k == alloc_kind::std_alloc) {
        run_snapshots<std_bytes>(state, working_set, keeping::none);
        state.SetLabel("malloc");
      } else if (k == alloc_kind::collapse) {
        run_snapshots<snapshot_collapse_bytes>(state, working_set, keeping::upkeep);
        state.SetLabel(fmt::format(
            "labelled collapse_allocator + upkeep_thread (tail budget {} ms "
            "per {} ms, held while a child lives)",
            snapshot_tail.stall.count() / 1'000'000, snapshot_tail.interval.count() / 1'000'000));
      } else if (k == alloc_kind::hugetlb_2m) {
        run_snapshots<hugetlb_2m_bytes>(state, working_set,
                                        PoolShort ? keeping::pool_short : keeping::none);
        state.SetLabel(PoolShort ? "2 MiB pool (huge_page_allocator), no free page for the copies"
                                 : "2 MiB pool (huge_page_allocator), free pages for a copy of "
                                   "the table");
      } else {
        run_snapshots<thp_bytes>(state, working_set, keeping::none);
        state.SetLabel("thp_allocator, no upkeep (khugepaged only)");
      }
    } catch (const std::exception& e) {
      state.SkipWithError(fmt::format("fork snapshot failed: {}", e.what()).c_str());
      return;
    }
  }
}

const bool fork_snapshot_declared = declare(
    suite_info("Scenario_ForkSnapshot", 203, per_allocator(&fork_snapshot<false>))
        .in_family("scenarios")
        .describe("a fare table at 100k requests/s (5% updates) while a child forked now and then "
                  "walks and reads it (its count and key sum checked); coverage every 50 ms, "
                  "lowest coverage, time from each child's exit to >= 99% huge, p99.9 from the "
                  "first fork on over the unforked p99.9 before it; collapse = ours with an "
                  "upkeep_thread on a tail budget, thp = ours without, hugetlb_2m = ours on the "
                  "pool with free pages for the copies")
        .per_op_unit("ms/run")
        .slow()
        .only_for(
            {alloc_kind::std_alloc, alloc_kind::thp, alloc_kind::collapse, alloc_kind::hugetlb_2m})
        .with_sizes({gib}, {64 * mib})
        .scenario()
        .own_process()
        .decays_on_purpose()
        .peers(peer_role::every_full_run)
        .target(target_info("ours (upkeep_thread, tail budget) back to >= 99% huge within 2 s of "
                            "each child's exit")
                    .value("recovery_ms_max", "collapse")
                    .at_most(2000))
        // A child after which the table was not back counts the time it was observed, which can
        // be below the bound when the loop ends early: this target keeps such a run from passing.
        .target(target_info("ours (upkeep_thread): the table back to >= 99% huge after every child")
                    .value("unrecovered_cycles", "collapse")
                    .at_most(0))
        .target(target_info("ours (upkeep_thread, tail budget): p99.9 while forking within 1.5x "
                            "of the unforked p99.9")
                    .value("p999_over_unforked", "collapse")
                    .at_most(1.5)));

const bool fork_pool_short_declared = declare(
    suite_info("Scenario_ForkPoolShort", 204, per_allocator(&fork_snapshot<true>))
        .in_family("scenarios")
        .describe("the fork scenario with the table on the 2 MiB pool and every other free pool "
                  "page reserved away: a copy-on-write the pool cannot serve takes the page from "
                  "the child, which dies of SIGBUS when it reads it (a FAILED row, by design)")
        .per_op_unit("ms/run")
        .slow()
        .only_for({alloc_kind::hugetlb_2m})
        .with_sizes({gib}, {64 * mib})
        .scenario()
        .own_process()
        .peers(peer_role::none));

}  // namespace
}  // namespace hugepage_bench
