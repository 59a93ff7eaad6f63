// tools/doctor/mounts.cpp - the mounts a process sees, from the library's mountinfo parser
// (mounts.hpp).
#include "mounts.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hugepage/kernel_files.hpp"

namespace hugepage::doctor {

std::vector<mount_entry> parse_mount_entries(std::string_view text) {
  std::vector<mount_entry> out;
  for (mount_info& mount : hugepage::parse_mountinfo(text)) {
    mount_entry m;
    m.device = std::move(mount.device);
    m.point = std::move(mount.point);
    m.fstype = std::move(mount.fstype);
    if (m.fstype == "tmpfs") {
      m.huge = "never";  // tmpfs's default, which mountinfo leaves out
      for (const std::string_view option : split(mount.super_options, ',')) {
        if (option.rfind("huge=", 0) == 0) m.huge = std::string(option.substr(5));
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace hugepage::doctor
