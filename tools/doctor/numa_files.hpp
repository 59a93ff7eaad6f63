// tools/doctor/numa_files.hpp - the NUMA files the doctor reads: a process's pages per node, the
// kernel's lists of cpus and nodes, the nodes a machine has (numa_files.cpp).
//
// /proc/<pid>/numa_maps gives each mapping's pages per node; Cpus_allowed_list,
// Mems_allowed_list (/proc/<pid>/status) and each node's cpulist are kernel id lists; the nodes
// are the node<N> directories under /sys/devices/system/node. The parsers take the text, so tests
// feed stored samples; numa_nodes() takes a root directory ("" for the live system), so tests
// feed a fake tree. Malformed lines and items are skipped.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace hugepage::doctor {

/// A process's resident memory on one NUMA node (/proc/<pid>/numa_maps). Bytes.
struct numa_usage {
  std::uint64_t bytes = 0;          ///< all pages on the node
  std::uint64_t hugetlb_bytes = 0;  ///< of which hugetlb pages (kernelpagesize_kB above 4 KiB)
};

/// Parses /proc/<pid>/numa_maps: "N<node>=<pages>" per mapping, times its kernelpagesize_kB.
/// (THP pages count as base pages there: the file cannot tell them apart.)
std::map<int, numa_usage> parse_numa_maps(std::string_view text);

/// The same per mapping: its start address -> node -> bytes.
std::map<std::uintptr_t, std::map<int, std::uint64_t>> parse_numa_maps_by_mapping(
    std::string_view text);

/// Parses a kernel list of numbers ("0-3,8,10-11", as Cpus_allowed_list and cpulist write them),
/// ascending, each once; an item that is not a number or range is skipped.
std::vector<int> parse_id_list(std::string_view text);

/// Lists the NUMA nodes under root/sys/devices/system/node (ascending); empty when there is none.
std::vector<int> numa_nodes(const std::string& root);

}  // namespace hugepage::doctor
