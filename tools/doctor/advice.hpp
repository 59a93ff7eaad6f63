// tools/doctor/advice.hpp - how a piece of advice is written: its level, facts, cost and commands
// (advice.cpp).
#pragma once

#include <string>
#include <vector>

#include "exit_codes.hpp"

namespace hugepage::doctor {

/// How much a piece of advice weighs: a warning makes the exit status 1, a note does not.
enum class advice_level { warning, note };

/// "warning" or "note".
const char* name_of(advice_level level) noexcept;

/// One piece of advice: what is wrong, the facts it rests on, what the fix costs, and the
/// commands that apply it.
///
/// Every command is built by text.hpp from values the doctor chose or computed (numbers, kernel
/// and configuration paths, a systemd unit name that passed safe_unit_name()), each word
/// shell-quoted. Of what a process controls, only the current value of a variable the advice
/// sets enters one (merged, so nothing in it is lost), and only when it is printable ASCII;
/// its title and mapping names never do.
struct advice {
  std::string id;  ///< stable identifier ("thp_never", "max_ptes_none", ...)
  advice_level level = advice_level::warning;
  std::string message;                ///< one sentence: the problem and its cost
  std::vector<std::string> evidence;  ///< the facts it rests on (files, counters, ranges)
  std::string trade;                  ///< what the fix costs; "" when nothing
  std::vector<std::string> commands;  ///< shell lines that apply it, in order; may be empty
  /// The memory classes (name_of(memory_class)) the fix reaches; empty when it is not about a
  /// class of the process's memory.
  std::vector<std::string> reaches{};
};

/// True when `list` holds a warning (exit status 1).
bool has_warning(const std::vector<advice>& list) noexcept;

/// The exit status a report with `list` ends with: exit_advice when it holds a warning, else
/// exit_healthy.
exit_status exit_code_of(const std::vector<advice>& list) noexcept;

}  // namespace hugepage::doctor
