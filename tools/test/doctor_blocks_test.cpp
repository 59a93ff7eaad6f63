// tools/test/doctor_blocks_test.cpp - the "largest mappings" entries of --pid: the split of each
// entry over page sizes, and the adjacent mappings of one block of the 1 GiB cascade joined into
// one entry (joins_cascade()), from hand-written smaps text.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "hugepage/smaps.hpp"
#include "mapping_summary.hpp"
#include "process_report.hpp"
#include "render_json.hpp"
#include "render_table.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

// For gtest's messages: {2097152 thp 62914560}.
void PrintTo(const page_share& share, std::ostream* out) {
  *out << '{' << share.page_bytes << ' ' << name_of(share.kind) << ' ' << share.bytes << '}';
}

namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t mib = kib * 1024;
constexpr std::size_t gib = mib * 1024;

// One smaps record as Linux 6.8 writes it (the fields the doctor reads; the parser skips the
// others). Sizes in bytes, written in kB.
struct vma {
  std::uintptr_t start = 0;
  std::size_t size = 0;
  std::string permissions = "rw-p";
  std::string name;
  std::size_t kernel_page = 4 * kib;
  std::size_t rss = 0;  // Rss (and Anonymous for a private mapping)
  std::size_t anon_huge = 0;
  std::size_t shmem_huge = 0;
  std::size_t private_hugetlb = 0;
  std::size_t shared_hugetlb = 0;
  std::string flags = "rd wr mr mw me ac sd";
};

std::string smaps_text(const std::vector<vma>& records) {
  std::ostringstream out;
  for (const vma& v : records) {
    const bool shared = v.permissions[3] == 's';
    char range[64];
    std::snprintf(range, sizeof range, "%012jx-%012jx", static_cast<std::uintmax_t>(v.start),
                  static_cast<std::uintmax_t>(v.start + v.size));
    out << range << ' ' << v.permissions << " 00000000 00:" << (v.name.empty() ? "00 0" : "10 7")
        << (v.name.empty() ? "" : "                          ") << v.name << '\n';
    const auto field = [&](const char* key, std::size_t bytes) {
      char line[64];
      std::snprintf(line, sizeof line, "%-16s%9zu kB\n", key, bytes / kib);
      out << line;
    };
    field("Size:", v.size);
    field("KernelPageSize:", v.kernel_page);
    field("MMUPageSize:", v.kernel_page);
    field("Rss:", v.rss);
    field("Anonymous:", shared ? 0 : v.rss);
    field("AnonHugePages:", v.anon_huge);
    field("ShmemPmdMapped:", v.shmem_huge);
    field("FilePmdMapped:", 0);
    field("Shared_Hugetlb:", v.shared_hugetlb);
    field("Private_Hugetlb:", v.private_hugetlb);
    field("Swap:", 0);
    out << "THPeligible:    " << (v.kernel_page == 4 * kib ? 1 : 0) << '\n';
    out << "VmFlags: " << v.flags << " \n";
  }
  return out.str();
}

process_report summary(const std::vector<vma>& records, std::size_t top = 10) {
  return summarize_mappings(parse_smaps(smaps_text(records)), top);
}

// A 1 GiB-aligned address; blocks below are placed at it and after it.
constexpr std::uintptr_t at = std::uintptr_t{0x7f40} << 32;

// The head of a cascade block: `pages` 1 GiB hugetlb pages, all faulted in (the library
// populates pool pages at allocation).
vma one_gib_head(std::uintptr_t start, std::size_t pages = 1) {
  vma v;
  v.start = start;
  v.size = pages * gib;
  v.name = "/anon_hugepage (deleted)";
  v.kernel_page = gib;
  v.private_hugetlb = pages * gib;
  v.flags = "rd wr mr mw me de ht sd";
  return v;
}

vma two_mib_hugetlb(std::uintptr_t start, std::size_t bytes) {
  vma v;
  v.start = start;
  v.size = bytes;
  v.name = "/anon_hugepage (deleted)";
  v.kernel_page = 2 * mib;
  v.private_hugetlb = bytes;
  v.flags = "rd wr mr mw me de ht sd";
  return v;
}

// Private anonymous memory; advised MADV_HUGEPAGE where `advised` (the library's THP tail).
vma anonymous(std::uintptr_t start, std::size_t bytes, std::size_t thp, bool advised) {
  vma v;
  v.start = start;
  v.size = bytes;
  v.rss = bytes;
  v.anon_huge = thp;
  v.flags = advised ? "rd wr mr mw me ac sd hg" : "rd wr mr mw me ac sd";
  return v;
}

std::vector<page_share> split(std::vector<page_share> pages) { return pages; }

// ---- joined blocks -----------------------------------------------------------------------------

TEST(DoctorBlocks, OneGiBHeadAndTwoMiBHugetlbTailAreOneEntry) {
  // A 1.5 GiB block of the cascade (1 GiB page + 256 pages of 2 MiB), beside a 1.25 GiB anonymous
  // arena that must rank below the whole block (but above either part alone).
  const process_report p = summary({anonymous(at - 2 * gib, gib + gib / 4, 0, false),
                                    one_gib_head(at), two_mib_hugetlb(at + gib, 512 * mib)});
  ASSERT_EQ(p.largest.size(), 2u);
  const anon_mapping& block = p.largest[0];
  EXPECT_EQ(block.start, at);
  EXPECT_EQ(block.size, gib + 512 * mib);
  EXPECT_EQ(block.resident, gib + 512 * mib);
  EXPECT_EQ(block.huge, gib + 512 * mib);
  EXPECT_EQ(block.kernel_page_bytes, gib);
  EXPECT_EQ(block.name, "/anon_hugepage (deleted)");
  EXPECT_EQ(block.mappings_joined, 2u);
  EXPECT_FALSE(block.shared);
  EXPECT_EQ(block.pages,
            split({{gib, page_kind::hugetlb, gib}, {2 * mib, page_kind::hugetlb, 512 * mib}}));
  EXPECT_EQ(p.largest[1].mappings_joined, 1u);
  EXPECT_EQ(p.largest[1].pages, split({{4 * kib, page_kind::base, gib + gib / 4}}));
  // The totals are per page size as before: joining changes the listing only.
  EXPECT_EQ(p.mappings, 3u);
  EXPECT_EQ(p.hugetlb.at(gib), gib);
  EXPECT_EQ(p.hugetlb.at(2 * mib), 512 * mib);
}

TEST(DoctorBlocks, OneGiBHeadAndThpTailAreOneEntry) {
  // The 2 MiB pool was short: the tail stayed THP-advised anonymous memory, 510 MiB of it on THP
  // and 2 MiB on base pages.
  const process_report p =
      summary({one_gib_head(at, 2), anonymous(at + 2 * gib, 512 * mib, 510 * mib, true)});
  ASSERT_EQ(p.largest.size(), 1u);
  const anon_mapping& block = p.largest[0];
  EXPECT_EQ(block.start, at);
  EXPECT_EQ(block.size, 2 * gib + 512 * mib);
  EXPECT_EQ(block.resident, 2 * gib + 512 * mib);
  EXPECT_EQ(block.huge, 2 * gib + 510 * mib);
  EXPECT_EQ(block.mappings_joined, 2u);
  EXPECT_EQ(block.flags, "hg");  // the tail's advice
  EXPECT_EQ(block.pages, split({{gib, page_kind::hugetlb, 2 * gib},
                                {2 * mib, page_kind::thp, 510 * mib},
                                {4 * kib, page_kind::base, 2 * mib}}));
}

TEST(DoctorBlocks, ThpSharesAreInThePmdSizeGiven) {
  // smaps does not say how large a THP is; the caller passes the machine's PMD size (512 MiB on
  // arm64 with 64 KiB pages).
  const process_report p = summarize_mappings(
      parse_smaps(smaps_text({anonymous(at, gib, 512 * mib, true)})), 10, 512 * mib);
  ASSERT_EQ(p.largest.size(), 1u);
  EXPECT_EQ(p.largest[0].pages,
            split({{512 * mib, page_kind::thp, 512 * mib}, {4 * kib, page_kind::base, 512 * mib}}));
}

TEST(DoctorBlocks, SingleMappingsCarryTheirOwnSplit) {
  const process_report p =
      summary({anonymous(at, 64 * mib, 60 * mib, true), two_mib_hugetlb(at + gib, 32 * mib),
               anonymous(at + 2 * gib, 8 * mib, 0, false)});
  ASSERT_EQ(p.largest.size(), 3u);
  EXPECT_EQ(p.largest[0].pages,
            split({{2 * mib, page_kind::thp, 60 * mib}, {4 * kib, page_kind::base, 4 * mib}}));
  EXPECT_EQ(p.largest[1].pages, split({{2 * mib, page_kind::hugetlb, 32 * mib}}));
  EXPECT_EQ(p.largest[2].pages, split({{4 * kib, page_kind::base, 8 * mib}}));
  for (const anon_mapping& m : p.largest) EXPECT_EQ(m.mappings_joined, 1u);
}

// ---- what is never joined ----------------------------------------------------------------------

TEST(DoctorBlocks, TwoAdjacentAnonymousMappingsAreNotJoined) {
  // Adjacent, 1 GiB-aligned, one advised and one not (the kernel would have merged equal ones):
  // neither is hugetlb, so no block.
  const process_report p =
      summary({anonymous(at, gib, gib, true), anonymous(at + gib, 512 * mib, 0, false)});
  ASSERT_EQ(p.largest.size(), 2u);
  EXPECT_EQ(p.largest[0].size, gib);
  EXPECT_EQ(p.largest[1].size, 512 * mib);
  EXPECT_EQ(p.largest[0].mappings_joined + p.largest[1].mappings_joined, 2u);
}

TEST(DoctorBlocks, HugetlbNextToSharedMemoryIsNotJoined) {
  vma memfd = anonymous(at + gib, 64 * mib, 0, true);
  memfd.permissions = "rw-s";
  memfd.name = "/memfd:cache (deleted)";
  vma shared_zero = anonymous(at + 4 * gib, 128 * mib, 0, true);
  shared_zero.permissions = "rw-s";
  shared_zero.name = "/dev/zero (deleted)";
  // A shared 1 GiB hugetlb mapping (a hugetlbfs file) followed by private 2 MiB pages.
  vma shared_head = one_gib_head(at + 8 * gib);
  shared_head.permissions = "rw-s";
  shared_head.name = "/dev/hugepages/segment";
  shared_head.private_hugetlb = 0;
  shared_head.shared_hugetlb = gib;
  const process_report p =
      summary({one_gib_head(at), memfd, one_gib_head(at + 3 * gib), shared_zero, shared_head,
               two_mib_hugetlb(at + 9 * gib, 256 * mib)});
  ASSERT_EQ(p.largest.size(), 6u);
  for (const anon_mapping& m : p.largest) {
    EXPECT_EQ(m.mappings_joined, 1u) << std::hex << m.start;
    EXPECT_EQ(m.pages.size(), 1u) << std::hex << m.start;
  }
}

// Each rule of joins_cascade(), broken one at a time on a pair that joins.
TEST(DoctorBlocks, EachRuleKeepsNeighboursApart) {
  const auto records = [](const std::vector<vma>& v) { return parse_smaps(smaps_text(v)); };
  const auto joins = [&](const vma& head, const vma& next) {
    const auto m = records({head, next});
    EXPECT_EQ(m.size(), 2u);
    return m.size() == 2 && joins_cascade(m[0], m[1]);
  };
  const vma head = one_gib_head(at);
  const vma tail_2m = two_mib_hugetlb(at + gib, 512 * mib);
  const vma tail_thp = anonymous(at + gib, 512 * mib, 510 * mib, true);
  ASSERT_TRUE(joins(head, tail_2m));
  ASSERT_TRUE(joins(head, tail_thp));

  vma gap = tail_2m;
  gap.start += 2 * mib;
  EXPECT_FALSE(joins(head, gap)) << "not adjacent";
  EXPECT_FALSE(joins(two_mib_hugetlb(at - 512 * mib, 512 * mib), head)) << "a larger page after";
  vma same_size = tail_2m;
  same_size.start = at + 512 * mib;
  EXPECT_FALSE(joins(two_mib_hugetlb(at, 512 * mib), same_size)) << "one page size";
  EXPECT_FALSE(joins(head, anonymous(at + gib, gib, gib, true))) << "a tail as long as a page";
  EXPECT_FALSE(joins(head, anonymous(at + gib, 512 * mib, 0, false))) << "an unadvised tail";
  vma heap = tail_thp;
  heap.name = "[heap]";
  EXPECT_FALSE(joins(head, heap)) << "the heap";
  vma named = tail_thp;
  named.name = "[anon:tail]";
  EXPECT_TRUE(joins(head, named)) << "a named anonymous tail";
  vma file = tail_thp;
  file.name = "/usr/lib/libc.so.6";
  EXPECT_FALSE(joins(head, file)) << "a file";
  vma read_only = tail_2m;
  read_only.permissions = "r--p";
  EXPECT_FALSE(joins(head, read_only)) << "other permissions";
  vma shared_tail = tail_2m;
  shared_tail.permissions = "rw-s";
  shared_tail.private_hugetlb = 0;
  shared_tail.shared_hugetlb = 512 * mib;
  vma shared_head = head;
  shared_head.permissions = "rw-s";
  EXPECT_FALSE(joins(shared_head, shared_tail)) << "shared";
  EXPECT_FALSE(joins(head, shared_tail)) << "private and shared";
  // A private block whose pages a forked child maps too (smaps counts them Shared_Hugetlb).
  vma forked_head = head;
  forked_head.private_hugetlb = 0;
  forked_head.shared_hugetlb = gib;
  vma forked_tail = tail_2m;
  forked_tail.private_hugetlb = 0;
  forked_tail.shared_hugetlb = 512 * mib;
  EXPECT_TRUE(joins(forked_head, forked_tail)) << "a forked process's block";
  EXPECT_TRUE(joins(two_mib_hugetlb(at, 2 * mib), anonymous(at + 2 * mib, mib, 0, true)));
  vma misaligned = two_mib_hugetlb(at + 4 * kib, 2 * mib);
  vma small = anonymous(at + 4 * kib + 2 * mib, mib, 0, true);
  EXPECT_FALSE(joins(misaligned, small)) << "a head off its page boundary";
}

TEST(DoctorBlocks, AHeadJoinsOneTail) {
  // The library maps one tail; a second small hugetlb mapping after it is a block of its own.
  const process_report p = summary({one_gib_head(at), two_mib_hugetlb(at + gib, 512 * mib),
                                    anonymous(at + gib + 512 * mib, 64 * mib, 64 * mib, true)});
  ASSERT_EQ(p.largest.size(), 2u);
  EXPECT_EQ(p.largest[0].mappings_joined, 2u);
  EXPECT_EQ(p.largest[0].size, gib + 512 * mib);
  EXPECT_EQ(p.largest[1].size, 64 * mib);
}

// ---- output ------------------------------------------------------------------------------------

TEST(DoctorBlocks, JsonListsPagesAndJoinedMappings) {
  process_report p = summary({one_gib_head(at), two_mib_hugetlb(at + gib, 512 * mib),
                              anonymous(at + 4 * gib, 64 * mib, 60 * mib, true)});
  const auto doc = nlohmann::json::parse(json_process(p, system_report{}, {}));
  const auto& largest = doc.at("process").at("largest_anonymous");
  ASSERT_EQ(largest.size(), 2u);
  const auto expected = nlohmann::json::parse(R"json({
    "start": "0x7f4000000000", "size_bytes": 1610612736, "resident_bytes": 1610612736,
    "huge_bytes": 1610612736, "kernel_page_bytes": 1073741824, "flags": "", "shared": false,
    "name": "/anon_hugepage (deleted)",
    "pages": [{"page_bytes": 1073741824, "kind": "hugetlb", "bytes": 1073741824},
              {"page_bytes": 2097152, "kind": "hugetlb", "bytes": 536870912}],
    "mappings_joined": 2})json");
  EXPECT_EQ(largest[0], expected) << largest[0].dump(2);
  EXPECT_EQ(largest[1].at("pages"), nlohmann::json::parse(R"([
    {"page_bytes": 2097152, "kind": "thp", "bytes": 62914560},
    {"page_bytes": 4096, "kind": "base", "bytes": 4194304}])"));
  EXPECT_EQ(largest[1].at("mappings_joined"), 1);
}

TEST(DoctorBlocks, TableShowsTheSplitWithinOneHundredColumns) {
  vma tail = anonymous(at + gib, 512 * mib, 510 * mib, true);
  vma head = one_gib_head(at);
  // A hugetlbfs file mapped privately: its name is the process's choice, escape sequence and all.
  head.name = "/dev/hugepages/\x1b[2Jblock";
  const process_report p = summary({head, tail, two_mib_hugetlb(at + 4 * gib, 32 * mib)});
  const std::string table = render_process(p, system_report{}, {});
  EXPECT_NE(table.find("\n                 1G 1 GiB + THP 510 MiB + 4K 2 MiB (2 mappings joined: "
                       "one block)\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("/dev/hugepages/\\x1b[2Jblock\n"), std::string::npos) << table;
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
  // A mapping on one page size needs no second line.
  EXPECT_EQ(table.find("2M 32 MiB"), std::string::npos) << table;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.find('/') != std::string::npos) continue;  // a row ends in a name of any length
    EXPECT_LE(line.size(), 100u) << line;
  }
}

}  // namespace
}  // namespace hugepage::doctor
