// tools/doctor/jvm_options.cpp - the options a JVM reads, in the order it reads them.
#include "jvm_options.hpp"

#include <algorithm>
#include <array>

namespace hugepage::doctor {

namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The words of an options variable, split at blanks as the JVM does.
void add_words(std::string_view value, jvm_option_source source, std::vector<jvm_option>& out) {
  while (!value.empty()) {
    const auto blank = value.find_first_of(" \t\n");
    const std::string_view word = value.substr(0, blank);
    if (!word.empty()) out.push_back({std::string(word), source});
    value.remove_prefix(blank == std::string_view::npos ? value.size() : blank + 1);
  }
}

// Launcher options (JDK 9 to 21) whose value is the next word unless written "--name=value".
bool takes_next_word(std::string_view word) {
  static constexpr std::array<std::string_view, 14> names = {
      "-cp",           "-classpath",
      "--class-path",  "-p",
      "--module-path", "--upgrade-module-path",
      "--add-modules", "--limit-modules",
      "--add-reads",   "--add-exports",
      "--add-opens",   "--patch-module",
      "--source",      "--enable-native-access"};
  return std::find(names.begin(), names.end(), word) != names.end();
}

}  // namespace

const char* name_of(jvm_option_source source) noexcept {
  switch (source) {
    case jvm_option_source::java_tool_options: return "JAVA_TOOL_OPTIONS";
    case jvm_option_source::jdk_java_options: return "JDK_JAVA_OPTIONS";
    case jvm_option_source::command_line: return "the command line";
    case jvm_option_source::java_options: return "_JAVA_OPTIONS";
  }
  return "?";
}

jvm_options read_jvm_options(std::string_view cmdline,
                             const std::vector<std::pair<std::string, std::string>>& environment) {
  std::vector<std::string_view> words;
  while (!cmdline.empty()) {
    const auto nul = cmdline.find('\0');
    words.push_back(cmdline.substr(0, nul));
    cmdline.remove_prefix(nul == std::string_view::npos ? cmdline.size() : nul + 1);
  }
  const auto variable = [&](std::string_view name) -> std::string_view {
    for (const auto& [key, value] : environment) {
      if (key == name) return value;
    }
    return {};
  };
  std::string_view launcher = words.empty() ? std::string_view() : words.front();
  launcher.remove_prefix(std::min(launcher.size(), launcher.rfind('/') + 1));
  const bool java = launcher == "java";

  jvm_options r;
  add_words(variable("JAVA_TOOL_OPTIONS"), jvm_option_source::java_tool_options, r.options);
  // Only the java launcher reads JDK_JAVA_OPTIONS, as if its words came first on the line.
  if (java) add_words(variable("JDK_JAVA_OPTIONS"), jvm_option_source::jdk_java_options, r.options);
  for (std::size_t i = 1; i < words.size(); ++i) {
    std::string_view w = words[i];
    if (!java) {
      // keytool, jcmd, jshell...: -J-X... goes to the JVM, the rest is the tool's. A program that
      // embeds the JVM hands it options through JNI, which no command line shows.
      if (starts_with(w, "-J-")) {
        r.options.push_back({std::string(w.substr(2)), jvm_option_source::command_line});
      }
      continue;
    }
    if (starts_with(w, "@")) {
      r.unread = std::string(w);
      break;
    }
    if (w == "-jar" || w == "-m" || w == "--module" || starts_with(w, "--module=") || w == "-d" ||
        w == "--describe-module" || starts_with(w, "--describe-module=")) {
      break;  // what follows (after the jar or module) is the application's
    }
    if (takes_next_word(w)) {
      ++i;
      continue;
    }
    if (!starts_with(w, "-")) break;  // the main class or a source file
    r.options.push_back({std::string(w), jvm_option_source::command_line});
  }
  add_words(variable("_JAVA_OPTIONS"), jvm_option_source::java_options, r.options);
  return r;
}

}  // namespace hugepage::doctor
