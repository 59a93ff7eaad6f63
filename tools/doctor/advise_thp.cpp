// tools/doctor/advise_thp.cpp - THP settings in advice: the effective mode, and the commands that
// set a sysfs file now and at boot.
#include <fmt/format.h>

#include "advise_parts.hpp"
#include "format.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

// Where the doctor's persistent settings go: files it names itself, so nothing in them comes
// from a process.
// One file per setting, so applying one piece of advice never undoes another.
std::string tmpfiles_conf(const std::string& file) {
  std::string name = file.substr(file.rfind('/') + 1);
  if (file.find("/hugepages-") != std::string::npos) {
    name = file.substr(file.find("/hugepages-") + 11,
                       file.rfind('/') - file.find("/hugepages-") - 11) +
           "-" + name;
  }
  return "/etc/tmpfiles.d/hugepage-doctor-" + name + ".conf";
}
// Sets a THP sysfs file now, and on every boot through tmpfiles.d ("w" writes the value).
std::vector<std::string> sysfs_setting(const std::string& value, const std::string& file) {
  return {write_command(value, file),
          file_command(tmpfiles_conf(file), {fmt::format("w {} - - - - {}", file, value)})};
}

// The effective PMD-size THP mode (read_thp_mode(): the per-size switch, else the top-level
// file); the top-level word where it could not be read.
std::string effective_enabled(const system_report& s, const char* unknown) {
  if (s.thp.pmd_mode) return name_of(*s.thp.pmd_mode);
  return s.thp.enabled.value_or(unknown);
}

thp_off thp_off_of(const system_report& s) {
  if (s.thp.pmd_enabled == std::optional<std::string>("never")) {
    const std::string file = fmt::format("{}/hugepages-{}kB/enabled", thp_dir, s.thp_bytes / 1024);
    const std::string top = s.thp.enabled.value_or("unknown");
    // The per-size file overrides the top-level one: "inherit" follows it where it is on.
    const bool top_on = top == "madvise" || top == "always";
    return {fmt::format("THP is off for {} pages (hugepages-{}kB/enabled=never, which overrides "
                        "enabled={})",
                        format_bytes(s.thp_bytes), s.thp_bytes / 1024, top),
            {file + ": never", fmt::format("{}/enabled: {}", thp_dir, top)},
            sysfs_setting(top_on ? "inherit" : "madvise", file)};
  }
  return {"THP is off (enabled=never)",
          {fmt::format("{}/enabled: never", thp_dir)},
          sysfs_setting("madvise", fmt::format("{}/enabled", thp_dir))};
}

}  // namespace hugepage::doctor
