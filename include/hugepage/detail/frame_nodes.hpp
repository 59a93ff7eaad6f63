// hugepage/detail/frame_nodes.hpp - which NUMA node holds a physical frame, from sysfs's memory
// blocks: /sys/devices/system/node/nodeN/memoryM says block M (block_size_bytes long, read from
// /sys/devices/system/memory/block_size_bytes in hex) is memory of node N. backing_nodes.hpp asks
// it for the present pages move_pages names no node for, where pagemap gives their frames (root).
#pragma once

#include <dirent.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"

namespace hugepage::detail {

class frame_nodes {
 public:
  // Files are read under `root` ("": the live system), on the first node_of().
  explicit frame_nodes(std::string root = "") : root_(std::move(root)) {}

  // The node whose memory holds frame `pfn`; -1 when no block names it, or names it for two nodes
  // (a block that straddles nodes says nothing exact about one frame), or sysfs has no blocks
  // (a kernel without CONFIG_MEMORY_HOTPLUG).
  int node_of(std::uint64_t pfn) {
    if (!loaded_) load();
    if (frames_per_block_ == 0) return -1;
    const std::uint64_t block = pfn / frames_per_block_;
    const auto at = std::lower_bound(
        blocks_.begin(), blocks_.end(), block,
        [](const std::pair<std::uint64_t, int>& b, std::uint64_t key) { return b.first < key; });
    return at == blocks_.end() || at->first != block ? -1 : at->second;
  }

 private:
  void load() {
    loaded_ = true;
    char buffer[64];
    const std::string size_path = root_ + "/sys/devices/system/memory/block_size_bytes";
    const long n = read_small_file(size_path.c_str(), buffer, sizeof buffer);
    if (n <= 0) return;
    buffer[n] = '\0';
    unsigned long long block_bytes = 0;
    if (std::sscanf(buffer, "%llx", &block_bytes) != 1) return;
    const std::size_t page = os::base_page_size();
    if (block_bytes < page) return;
    const std::string nodes_path = root_ + "/sys/devices/system/node";
    DIR* nodes = ::opendir(nodes_path.c_str());
    if (nodes == nullptr) return;
    while (const dirent* node_entry = ::readdir(nodes)) {
      int node = -1;
      char tail = 0;
      if (std::sscanf(node_entry->d_name, "node%d%c", &node, &tail) != 1 || node < 0) continue;
      const std::string node_path = nodes_path + '/' + node_entry->d_name;
      DIR* dir = ::opendir(node_path.c_str());
      if (dir == nullptr) continue;
      while (const dirent* entry = ::readdir(dir)) {
        unsigned long long block = 0;
        if (std::sscanf(entry->d_name, "memory%llu%c", &block, &tail) == 1) {
          blocks_.emplace_back(block, node);
        }
      }
      ::closedir(dir);
    }
    ::closedir(nodes);
    std::sort(blocks_.begin(), blocks_.end());
    // A block listed under two nodes holds memory of both: no node is exact for its frames.
    std::vector<std::pair<std::uint64_t, int>> unique;
    for (const auto& b : blocks_) {
      if (!unique.empty() && unique.back().first == b.first) {
        unique.back().second = -1;
      } else {
        unique.push_back(b);
      }
    }
    blocks_ = std::move(unique);
    frames_per_block_ = block_bytes / page;
  }

  std::string root_;
  bool loaded_ = false;
  std::uint64_t frames_per_block_ = 0;
  std::vector<std::pair<std::uint64_t, int>> blocks_;  // (block, node), by block
};

}  // namespace hugepage::detail
