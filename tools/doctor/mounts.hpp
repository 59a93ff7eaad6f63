// tools/doctor/mounts.hpp - the mounts a process sees, as memory classes need them (mounts.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hugepage::doctor {

/// One mount of a process's mount namespace (/proc/PID/mountinfo).
struct mount_entry {
  std::string point;   ///< mount point, escapes decoded
  std::string device;  ///< major:minor of its superblock: bind mounts of one share it
  std::string fstype;  ///< "tmpfs", "ext4", ...
  std::string huge;    ///< tmpfs: the huge= super option, "never" when absent; else ""
};

/// The mounts in mountinfo text as mount_entry, in its order (a later mount on one point hides an
/// earlier): the doctor's view over hugepage::parse_mountinfo(). Pure.
std::vector<mount_entry> parse_mount_entries(std::string_view text);

}  // namespace hugepage::doctor
