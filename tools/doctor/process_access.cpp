// tools/doctor/process_access.cpp - why a process cannot be read: the facts, and the message.
#include "process_access.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <system_error>

#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "read_text.hpp"

namespace hugepage::doctor {

access_facts read_access_facts(const process_view& target) {
  access_facts f;
  f.euid = ::geteuid();
  struct stat st {};
  if (target.stat_of("", st) == 0) f.target_uid = st.st_uid;
  if (const auto mounts = read_mountinfo()) {
    // "36 25 0:5 / /proc rw,... - proc proc rw,hidepid=invisible": the last proc mount on /proc
    // with the option decides.
    for (const mount_info& m : *mounts) {
      if (m.point != "/proc" || m.fstype != "proc") continue;
      for (const std::string_view option : split(m.super_options, ',')) {
        if (option.rfind("hidepid=", 0) == 0) f.hidepid = std::string(option.substr(8));
      }
    }
  }
  if (const auto map = read_text("", "/proc/self/uid_map")) {
    // The initial namespace maps all 2^32 - 1 ids from 0 to 0.
    unsigned long inside = 1, outside = 1, count = 0;
    f.user_namespace = std::sscanf(map->c_str(), "%lu %lu %lu", &inside, &outside, &count) != 3 ||
                       inside != 0 || outside != 0 || count != 4294967295UL;
  }
  if (const auto status = read_status()) {
    if (const auto caps = status->mask("CapEff")) {
      f.cap_sys_ptrace = (*caps >> 19U) & 1U;  // CAP_SYS_PTRACE
    }
  }
  return f;
}

std::string explain_unreadable(pid_t pid, int err, const access_facts& f) {
  const std::string who = "pid " + std::to_string(pid);
  const bool hides = f.hidepid == "2" || f.hidepid == "invisible";
  const bool denies = f.hidepid == "1" || f.hidepid == "noaccess";
  const bool ptraceable = f.hidepid == "4" || f.hidepid == "ptraceable";
  if (err == ENOENT || err == ESRCH) {
    if ((hides || ptraceable) && f.euid != 0) {
      return "no process with " + who + " visible: /proc is mounted hidepid=" + f.hidepid +
             ", which hides other users' processes (run as root, as the process's user, or as "
             "a member of the group named by the mount's gid= option)";
    }
    return "no process with " + who;
  }
  const std::string prefix = "cannot read /proc/" + std::to_string(pid) +
                             "/smaps: " + std::system_category().message(err) + " (";
  if (f.euid == 0) {
    if (f.user_namespace) {
      return prefix +
             "the doctor runs as root inside a user namespace, a container boundary: that root "
             "has no rights over " +
             who +
             "; run the doctor in the target's namespace or on "
             "the host)";
    }
    if (!f.cap_sys_ptrace) {
      return prefix +
             "the doctor runs as root without CAP_SYS_PTRACE, which reading another "
             "process's memory map needs; the capability bounding set of this "
             "container or unit removed it)";
    }
    return prefix +
           "root with CAP_SYS_PTRACE was refused: a security module (AppArmor, SELinux) "
           "forbids it)";
  }
  std::string cause;
  if (f.target_uid && *f.target_uid != f.euid) {
    cause = who + " belongs to uid " + std::to_string(*f.target_uid) +
            " and the doctor runs as uid " + std::to_string(f.euid) +
            ": run it as root or as uid " + std::to_string(*f.target_uid);
  } else if (f.target_uid) {
    cause = who +
            " runs as the same uid but is not dumpable (setuid, file capabilities or "
            "prctl(PR_SET_DUMPABLE, 0)): run the doctor as root";
  } else {
    cause = "run as root or as the user that owns " + who;
  }
  if (denies) cause += "; /proc is mounted hidepid=" + f.hidepid + " as well";
  return prefix + cause + ")";
}

}  // namespace hugepage::doctor
