// tools/doctor/text.hpp - making text safe to print: shell words, terminal cells, unit names.
//
// The doctor prints commands an operator pastes, and tables that show what processes call
// themselves. A process controls its title (argv, comm), its environment and the names of its
// mappings, so none of that text may reach a command, and in a table it is shown escaped: no
// control byte, no escape sequence, no invalid UTF-8 reaches the terminal.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hugepage::doctor {

/// One shell word for `text`: as it is when it holds only characters no POSIX shell treats
/// specially ([A-Za-z0-9_./:=,+@%-]; not empty, not starting with '=', which zsh expands),
/// otherwise single-quoted with each ' written as '\''.
std::string shell_quote(std::string_view text);

/// A command line: each word shell-quoted, joined by spaces.
std::string shell_line(const std::vector<std::string>& words);

/// A command that writes `value` into the kernel file `path`: "echo VALUE > PATH", both quoted.
std::string write_command(std::string_view value, std::string_view path);

/// A command that creates `path` holding `lines` (one per line): "printf '%s\n' L1 L2 > PATH",
/// each line a quoted word; preceded by "mkdir -p DIR && " when `make_directory`.
std::string file_command(std::string_view path, const std::vector<std::string>& lines,
                         bool make_directory = false);

/// Like file_command(path, lines, true), but the shell's noclobber (set -C) makes it fail with
/// "cannot overwrite existing file" instead of replacing a file that exists:
/// "mkdir -p DIR && (set -C; printf '%s\n' L1 L2 > PATH)".
std::string new_file_command(std::string_view path, const std::vector<std::string>& lines);

/// True when every byte of `text` is printable ASCII (0x20-0x7e): text a process controls may
/// enter a command only then, quoted. Control bytes, and any non-ASCII character (which could
/// reorder or hide what a terminal shows), make it false.
bool printable_ascii(std::string_view text);

/// A systemd unit line that sets `name` to `value`: Environment="NAME=VALUE", with '%' doubled
/// (systemd expands specifiers there). "" when `value` is not printable_ascii() or holds '"' or
/// '\' (systemd unescapes those): such a value must be set by hand.
std::string systemd_environment(std::string_view name, std::string_view value);

/// `text` for a terminal: valid UTF-8 printable characters as they are; control bytes (C0, DEL,
/// C1), invalid UTF-8 and backslashes as \xNN / \\ escapes. Never contains a byte < 0x20.
std::string printable(std::string_view text);

/// True when `name` is a systemd service unit name made only of [A-Za-z0-9:_.@-] and ending in
/// ".service" (at most 255 bytes): safe to put in a command even though the process's cgroup
/// path is chosen by whoever started it. Escaped unit names (with '\') are refused.
bool safe_unit_name(std::string_view name);

/// The systemd service unit a process runs in, from /proc/PID/cgroup text: the v2 path (the v1
/// name=systemd path where v2 has only "/") when it is a system service's own cgroup, only
/// "*.slice" components then a "*.service" one, last, not a user manager ("user@..."). "" for a
/// cgroup below a service, scope or user manager (its owner named it), or a name that fails
/// safe_unit_name().
std::string systemd_unit(std::string_view cgroup_file_text);

}  // namespace hugepage::doctor
