// tools/doctor/exit_codes.hpp - hugepage-doctor's exit statuses and what each means.
//
// One table: the code returns these values, --help prints the meanings, tools/README.md
// ("Exit status") documents the same list.
#pragma once

#include <string>

namespace hugepage::doctor {

enum exit_status : int {
  exit_healthy = 0,        ///< no warning (notes may be printed); the probe ran
  exit_advice = 1,         ///< a warning; --collapse: nothing collapsed although it could gain
  exit_error = 2,          ///< bad usage, no such process, permission denied, ... (one line)
  exit_zombie = 3,         ///< --pid names a zombie: no memory to report
  exit_kernel_thread = 4,  ///< --pid names a kernel thread: no user memory to report
};

struct exit_status_meaning {
  exit_status code;
  const char* meaning;  ///< as --help prints it (continuation lines indented to match)
};

inline constexpr exit_status_meaning exit_status_meanings[] = {
    {exit_healthy, "healthy: no warning (notes may be printed; --probe: the probe ran)"},
    {exit_advice,
     "advice given: at least one warning; --collapse: nothing collapsed (--dry-run: nothing\n"
     "     can be) although memory is on base pages, with the reason"},
    {exit_error,
     "error: bad usage, no such process, permission denied (with the cause), the process exited\n"
     "     while being read, probe failed, stdout not writable; one line on stderr, nothing on "
     "stdout"},
    {exit_zombie, "--pid names a zombie (exited, not reaped)"},
    {exit_kernel_thread, "--pid names a kernel thread"},
};

/// The "Exit status:" section of --help: one line (or more) per code of exit_status_meanings.
inline std::string exit_status_help() {
  std::string out = "Exit status:\n";
  for (const exit_status_meaning& m : exit_status_meanings) {
    out += "  " + std::to_string(static_cast<int>(m.code)) + "  " + m.meaning + "\n";
  }
  return out;
}

}  // namespace hugepage::doctor
