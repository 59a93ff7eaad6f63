// tools/doctor/advice.hpp - how a piece of advice is written: its rule, level, facts, cost and
// commands (advice.cpp).
#pragma once

#include <string>
#include <vector>

#include "advice_level.hpp"
#include "exit_codes.hpp"
#include "rule_catalog.hpp"

namespace hugepage::doctor {

/// One piece of advice: what is wrong, the facts it rests on, what the fix costs, and the
/// commands that apply it. Its id and level come from its rule's row (rule_catalog.hpp): the
/// level is the row's, or lower.
///
/// Every command is built by text.hpp from values the doctor chose or computed (numbers, kernel
/// and configuration paths, a systemd unit name that passed safe_unit_name()), each word
/// shell-quoted. Of what a process controls, only the current value of a variable the advice
/// sets enters one (merged, so nothing in it is lost), and only when it is printable ASCII;
/// its title and mapping names never do.
class advice {
 public:
  /// Advice of `rule`, at its row's level, saying `text`, resting on `facts`, whose fix costs
  /// `cost` and is applied by `lines`.
  advice(rule_id rule, std::string text, std::vector<std::string> facts = {}, std::string cost = {},
         std::vector<std::string> lines = {});

  /// The rule that gives it.
  rule_id rule() const noexcept { return rule_; }
  /// Its rule's stable identifier ("thp_never", "max_ptes_none", ...).
  std::string id() const { return rule_of(rule_).id; }
  advice_level level() const noexcept { return level_; }
  /// Makes it a note: what it finds is small, or the fix is a choice rather than a fault.
  void lower_to_note() noexcept { level_ = advice_level::note; }

  std::string message;                ///< one sentence: the problem and its cost
  std::vector<std::string> evidence;  ///< the facts it rests on (files, counters, ranges)
  std::string trade;                  ///< what the fix costs; "" when nothing
  std::vector<std::string> commands;  ///< shell lines that apply it, in order; may be empty
  /// The memory classes (name_of(memory_class)) the fix reaches; empty when it is not about a
  /// class of the process's memory.
  std::vector<std::string> reaches{};

 private:
  rule_id rule_;
  advice_level level_;
};

/// True when `list` holds a warning (exit status 1).
bool has_warning(const std::vector<advice>& list) noexcept;

/// The exit status a report with `list` ends with: exit_advice when it holds a warning, else
/// exit_healthy.
exit_status exit_code_of(const std::vector<advice>& list) noexcept;

}  // namespace hugepage::doctor
