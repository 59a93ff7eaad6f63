// tools/doctor/process_access.hpp - why a process cannot be read, in words (process_access.cpp).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "hugepage/process_view.hpp"

namespace hugepage::doctor {

/// The message for a pid that cannot be read with `err` (EACCES, EPERM, ENOENT), from the facts
/// of this machine: hidepid in `proc_mount_options`, the target's owner `target_uid` (nullopt:
/// unknown), the doctor's `euid`, whether it runs in a user namespace, whether it has
/// CAP_SYS_PTRACE. Pure.
struct access_facts {
  unsigned euid = 0;
  std::optional<unsigned> target_uid;
  std::string hidepid;  ///< "", "1"/"noaccess", "2"/"invisible", "4"/"ptraceable"
  bool user_namespace = false;
  bool cap_sys_ptrace = true;
};

std::string explain_unreadable(pid_t pid, int err, const access_facts& facts);

/// The facts of this machine (access_facts) explain_unreadable() needs for the process of
/// `target`.
access_facts read_access_facts(const process_view& target);

}  // namespace hugepage::doctor
