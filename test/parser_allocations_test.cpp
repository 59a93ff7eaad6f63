// parser_allocations_test.cpp - the kernel-text parsers allocate only their results: no temporary
// per line, so a file of millions of empty or junk lines costs no more than its result. This test
// binary replaces the global operator new to count what a parse allocates on its thread.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <string_view>

#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/kernel_memory.hpp"
#include "hugepage/smaps.hpp"

namespace {

thread_local bool counting = false;
thread_local std::size_t counted_bytes = 0;

void* allocate(std::size_t n) {
  if (counting) counted_bytes += n;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept {
  return operator new(n, tag);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t /*n*/) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t /*n*/) noexcept { std::free(p); }

namespace {

// The bytes `parse` allocates on this thread (its result's included).
std::size_t allocated_by(const std::function<void()>& parse) {
  counted_bytes = 0;
  counting = true;
  parse();
  counting = false;
  return counted_bytes;
}

std::string repeated(std::string_view line, std::size_t bytes) {
  std::string text;
  text.reserve(bytes + line.size());
  while (text.size() < bytes) text.append(line);
  return text;
}

// Each parser over 4 MiB of text whose result is empty or one entry (every line the same): what it
// allocates is its result, far below 64 KiB. Splitting into a vector of lines took 16 bytes a line
// (over 64 MiB for 4 Mi newlines, more with the vector's regrowth), a vector of words per line
// and a std::string key per line more.
TEST(ParserAllocations, ManyLinesCostNoMoreThanTheResult) {
  constexpr std::size_t size = std::size_t{4} << 20;
  constexpr std::size_t budget = 64 * 1024;
  const std::string texts[] = {
      std::string(size, '\n'),
      repeated("Some_key_longer_than_a_short_string 1 2 3 4 5 6 7 8 9 10\n", size),
      repeated("A_key_longer_than_a_short_string:      12 kB\n", size),
      repeated("Node 0, zone Normal 1 2 x\n", size),
  };
  for (const std::string& text : texts) {
    const std::string_view t = text;
    const std::string first_line(t.substr(0, t.find('\n')));
    hugepage::cpu_info flags;  // a flags line as long as the text, split at its blanks
    flags.flags = text;
    const std::pair<const char*, std::function<void()>> parsers[] = {
        {"parse_mountinfo", [t] { static_cast<void>(hugepage::parse_mountinfo(t)); }},
        {"parse_proc_cgroup", [t] { static_cast<void>(hugepage::parse_proc_cgroup(t)); }},
        {"parse_vmstat", [t] { static_cast<void>(hugepage::parse_vmstat(t)); }},
        {"parse_meminfo", [t] { static_cast<void>(hugepage::parse_meminfo(t)); }},
        {"parse_status", [t] { static_cast<void>(hugepage::parse_status(t)); }},
        {"parse_smaps_rollup", [t] { static_cast<void>(hugepage::parse_smaps_rollup(t)); }},
        {"parse_cpuinfo", [t] { static_cast<void>(hugepage::parse_cpuinfo(t)); }},
        {"parse_buddyinfo", [t] { static_cast<void>(hugepage::parse_buddyinfo(t)); }},
        {"parse_zoneinfo", [t] { static_cast<void>(hugepage::parse_zoneinfo(t)); }},
        {"parse_smaps", [t] { static_cast<void>(hugepage::parse_smaps(t)); }},
        {"parse_statm", [t] { static_cast<void>(hugepage::parse_statm(t)); }},
        {"cpu_info::has_flag", [&flags] { static_cast<void>(flags.has_flag("pdpe1gb")); }},
    };
    for (const auto& [name, parse] : parsers) {
      EXPECT_LE(allocated_by(parse), budget) << name << " over lines of '" << first_line << "'";
    }
  }
}

// The counter counts: a parse with a result of many entries is seen allocating.
TEST(ParserAllocations, TheCounterSeesAResult) {
  const std::string text = repeated("0::/a\n", 4096);
  EXPECT_GT(allocated_by([&text] { static_cast<void>(hugepage::parse_proc_cgroup(text)); }),
            std::size_t{4096});
}

}  // namespace
