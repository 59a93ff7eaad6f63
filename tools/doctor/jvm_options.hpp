// tools/doctor/jvm_options.hpp - the options a JVM reads, in the order it reads them: from its
// options variables and the launcher's command line, without the application's arguments.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hugepage::doctor {

/// Where a JVM option came from, lowest precedence first: HotSpot reads JAVA_TOOL_OPTIONS, then
/// the command line (where the java launcher puts JDK_JAVA_OPTIONS first), then _JAVA_OPTIONS;
/// of two settings of one flag the later wins.
enum class jvm_option_source { java_tool_options, jdk_java_options, command_line, java_options };

/// "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "the command line", "_JAVA_OPTIONS".
const char* name_of(jvm_option_source source) noexcept;

struct jvm_option {
  std::string text;  ///< "-Xmx1g", "-XX:+UseLargePages" (a JDK tool's -J prefix removed)
  jvm_option_source source = jvm_option_source::command_line;
};

/// The JVM options in reading order. For the java launcher (argv[0] named java) the command line
/// ends at the main class, a source file, -jar FILE, -m/--module MOD or --describe-module: what
/// follows is the application's; launcher options that take a value (-cp X, --add-modules X,
/// ...) consume the next word. An @argfile is not read (its file may have changed since): the
/// words from it on are left out and `unread` names it. JDK tools (keytool, jcmd, jshell) pass
/// options as -J-X...: only those are kept. Pure.
struct jvm_options {
  std::vector<jvm_option> options;
  std::string unread;  ///< "@file": the first argument file on the command line, not read
};
jvm_options read_jvm_options(std::string_view cmdline,
                             const std::vector<std::pair<std::string, std::string>>& environment);

}  // namespace hugepage::doctor
