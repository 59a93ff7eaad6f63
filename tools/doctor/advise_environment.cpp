// tools/doctor/advise_environment.cpp - settings merged into what a process or mount has now:
// environment variables of a service, /dev/shm's mount options.
#include <fmt/format.h>

#include <optional>

#include "advice.hpp"
#include "advise_parts.hpp"
#include "process_report.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {

std::vector<std::string_view> split_entries(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto at = text.find(separator);
    const std::string_view entry = text.substr(0, at);
    text.remove_prefix(at == std::string_view::npos ? text.size() : at + 1);
    if (!entry.empty()) out.push_back(entry);
  }
  return out;
}

// `add`'s entries merged into `current`: an entry of a key that `current` has replaces the first
// entry of that key where it stands, and later ones of that key are dropped (the last would
// win); every other entry keeps its place; new keys go at the end.
std::string merge_entries(std::string_view current, std::string_view add, list_syntax syntax) {
  if (syntax.separator == 0) return std::string(add);
  std::vector<std::string> out;
  for (const std::string_view entry : split_entries(current, syntax.separator)) {
    out.emplace_back(entry);
  }
  const auto key = [&](std::string_view entry) {
    return syntax.key_end == 0 ? entry : entry.substr(0, entry.find(syntax.key_end));
  };
  for (const std::string_view entry : split_entries(add, syntax.separator)) {
    bool placed = false;
    for (auto it = out.begin(); it != out.end();) {
      if (key(*it) != key(entry)) {
        ++it;
      } else if (!placed) {
        *it++ = std::string(entry);
        placed = true;
      } else {
        it = out.erase(it);
      }
    }
    if (!placed) out.emplace_back(entry);
  }
  std::string joined;
  for (const std::string& entry : out) {
    if (!joined.empty()) joined += syntax.separator;
    joined += entry;
  }
  return joined;
}

// A setting for a service's environment, merged into the value the process has now (from
// /proc/PID/environ) so that nothing already there is lost: the commands, and the clause the
// message ends with (how they apply it, or why it must be done by hand).
struct environment_fix {
  std::vector<std::string> commands;
  std::string how;
  std::vector<std::string> evidence;
};

// The process's value is the one place where text a process controls enters a command: only
// when it is printable ASCII (and, for a unit file, free of '"' and '\'), always quoted.
// Otherwise no command: the operator merges it by hand.
environment_fix environment_setting(const process_report& p, const std::string& name,
                                    const std::string& add, list_syntax syntax) {
  environment_fix fix;
  const allocator_report& a = p.allocator;
  if (!a.environ_readable || a.environ_overwritten) {
    fix.how = fmt::format(
        "add {} to {} by hand, keeping what it holds (the process's "
        "environment cannot be read)",
        add, name);
    return fix;
  }
  std::optional<std::string> current;
  for (const auto& [key, value] : a.settings) {
    if (key == name && !current) current = value;
  }
  const std::string value = current ? merge_entries(*current, add, syntax) : add;
  if (current) {
    fix.evidence.push_back(fmt::format("{}={} now (/proc/PID/environ){}", name, *current,
                                       syntax.separator != 0 ? ": merged, the rest kept" : ""));
  }
  const std::string by_hand =
      fmt::format("add {} to {} by hand, keeping what it holds: its value", add, name);
  if (!printable_ascii(value)) {
    fix.how = by_hand + " has control or non-ASCII bytes, which no printed command carries";
    return fix;
  }
  if (p.unit.empty()) {
    fix.commands = {"export " + shell_quote(name + "=" + value)};
    fix.how = "set it in the environment of whatever starts the process, then restart it";
    return fix;
  }
  const std::string line = systemd_environment(name, value);
  if (line.empty()) {
    fix.how = by_hand + " has '\"' or '\\', which a unit file would unescape";
    return fix;
  }
  // A file of the doctor's own per variable, so it never replaces another drop-in; "zz-" sorts
  // it after the others (override.conf included), whose values the merged one already holds.
  const std::string file =
      fmt::format("/etc/systemd/system/{}.d/zz-hugepage-doctor-{}.conf", p.unit, name);
  fix.commands = {new_file_command(file, {"[Service]", line}),
                  shell_line({"systemctl", "daemon-reload"}),
                  shell_line({"systemctl", "restart", p.unit})};
  fix.how = fmt::format(
      "a drop-in of its own for {} (refused if that file exists: then merge "
      "by hand), then a restart",
      p.unit);
  return fix;
}

}  // namespace

// Makes /dev/shm's huge= option persistent: a line in /etc/fstab (systemd-remount-fs applies an
// fstab line's options to /dev/shm at boot) with the options it is mounted with now, added only
// when fstab has no /dev/shm line yet; otherwise it says to edit that line, and changes nothing.
std::string dev_shm_fstab_command(const system_report& s) {
  // Options the kernel wrote (a space as \040) that are not plain option text are not copied:
  // the flags systemd mounts /dev/shm with stand in.
  std::string options = s.dev_shm_options.value_or("");
  const bool plain = !options.empty() && printable_ascii(options) &&
                     options.find_first_of(" #\\'\"") == std::string::npos;
  options = merge_entries(plain ? options : "rw,nosuid,nodev", "huge=within_size", {',', '='});
  return "if grep -Eqs '^[[:space:]]*[^#[:space:]]+[[:space:]]+/dev/shm[[:space:]]' /etc/fstab; "
         "then echo '/etc/fstab has a /dev/shm line: add huge=within_size to its options by "
         "hand' >&2; else printf '%s\\n' " +
         shell_quote("tmpfs /dev/shm tmpfs " + options + " 0 0") + " >> /etc/fstab; fi";
}

// A warning that sets `name` for the process: `text` then how the fix applies.
advice environment_advice(const process_report& p, rule_id rule, const std::string& text,
                          std::vector<std::string> evidence, std::string trade,
                          const std::string& name, const std::string& add, list_syntax syntax) {
  environment_fix fix = environment_setting(p, name, add, syntax);
  evidence.insert(evidence.end(), fix.evidence.begin(), fix.evidence.end());
  return {rule, text + fix.how, std::move(evidence), std::move(trade), std::move(fix.commands)};
}

}  // namespace hugepage::doctor
