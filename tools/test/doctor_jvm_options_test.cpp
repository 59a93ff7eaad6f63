// tools/test/doctor_jvm_options_test.cpp - the JVM options the doctor reads are the JVM's: not the
// application's arguments after the main class, in the JVM's order of precedence
// (JAVA_TOOL_OPTIONS < JDK_JAVA_OPTIONS < command line < _JAVA_OPTIONS), and the advice names
// the variable that wins over a -XX:-UseTransparentHugePages the JVM has.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "advice.hpp"
#include "advise_process.hpp"
#include "doctor_advise_support.hpp"
#include "jvm_options.hpp"
#include "process_report.hpp"
#include "runtime_detect.hpp"

namespace hugepage::doctor {
namespace {

using namespace advice_test;

using environment = std::vector<std::pair<std::string, std::string>>;

template <std::size_t n>
runtime_report jvm(const char (&text)[n], const environment& env = {}) {
  return detect_runtime({libjvm}, cmdline_of(text), env);
}

TEST(DoctorJvmOptions, ApplicationArgumentsAreNotJvmFlags) {
  // "-Xmx16g" is Sleep's argument; the heap is 1 GiB.
  runtime_report r =
      jvm("java\0-XX:+UseLargePages\0-Xmx1g\0-Xms600m\0-XX:+AlwaysPreTouch\0-cp\0/opt/app\0Sleep\0"
          "0\0-Xmx16g");
  EXPECT_EQ(r.heap_bytes, 1 * gib);
  EXPECT_TRUE(r.uses_pool);
  r = jvm(
      "java\0-XX:+UseLargePages\0-Xmx1g\0-cp\0/opt/app\0Sleep\0000\0-XX:+UseTransparentHugePages");
  EXPECT_TRUE(r.uses_pool);
  EXPECT_EQ(r.settings, std::vector<std::string>{"-XX:+UseLargePages"});
  EXPECT_TRUE(r.thp_flag_source.empty());
  // The options end at -jar FILE, -m/--module MOD, a source file.
  EXPECT_EQ(jvm("java\0-Xmx1g\0-jar\0app.jar\0-Xmx16g").heap_bytes, 1 * gib);
  EXPECT_EQ(jvm("java\0-Xmx1g\0-m\0app/app.Main\0-Xmx16g").heap_bytes, 1 * gib);
  EXPECT_EQ(jvm("java\0-Xmx1g\0--module=app/app.Main\0-Xmx16g").heap_bytes, 1 * gib);
  EXPECT_EQ(jvm("java\0-Xmx1g\0Main.java\0-Xmx16g").heap_bytes, 1 * gib);
  // Launcher options with a value consume the next word, in either spelling.
  EXPECT_EQ(jvm("java\0--class-path\0lib\0-Xmx2g\0Main").heap_bytes, 2 * gib);
  EXPECT_EQ(jvm("java\0--add-modules\0jdk.incubator.vector\0-Xmx2g\0Main").heap_bytes, 2 * gib);
  EXPECT_EQ(jvm("java\0--add-modules=jdk.incubator.vector\0-Xmx2g\0Main").heap_bytes, 2 * gib);
  EXPECT_EQ(jvm("java\0-p\0mods\0-Xmx2g\0-m\0app\0-Xmx16g").heap_bytes, 2 * gib);
  // An @argfile is not read: the words from it on are left out, and the report says so.
  r = jvm("java\0-Xmx1g\0@opts.txt\0-Xmx16g\0Main");
  EXPECT_EQ(r.heap_bytes, 1 * gib);
  EXPECT_EQ(r.options_unread, "@opts.txt");
  EXPECT_EQ(r.settings, std::vector<std::string>{"@opts.txt (argument file, not read)"});
  // A JDK tool's -J options are the JVM's; its own arguments are not.
  EXPECT_EQ(jvm("keytool\0-J-Xmx1g\0-genkeypair\0-Xmx16g").heap_bytes, 1 * gib);
}

TEST(DoctorJvmOptions, PrecedenceIsTheJvms) {
  // _JAVA_OPTIONS is read last and wins over the command line (PrintFlagsFinal: MaxHeapSize 1 GiB).
  runtime_report r = jvm("java\0-Xmx768m\0-Xms600m\0-cp\0/opt/app\0Sleep",
                         {{"_JAVA_OPTIONS", "-Xmx1g -XX:+UseLargePages"}});
  EXPECT_EQ(r.heap_bytes, 1 * gib);
  EXPECT_TRUE(r.uses_pool);
  // Whatever the order of the variables in the environment.
  const environment all = {{"_JAVA_OPTIONS", "-Xmx4g -XX:-UseTransparentHugePages"},
                           {"JDK_JAVA_OPTIONS", "-Xmx2g -XX:+UseTransparentHugePages"},
                           {"JAVA_TOOL_OPTIONS", "-Xmx1g -XX:+UseTransparentHugePages"}};
  r = jvm("java\0-Xmx3g\0Main", all);
  EXPECT_EQ(r.heap_bytes, 4 * gib);
  EXPECT_FALSE(r.asks_for_huge);
  EXPECT_EQ(r.thp_flag_source, "_JAVA_OPTIONS");
  // Without _JAVA_OPTIONS the command line wins over JDK_JAVA_OPTIONS, which wins over
  // JAVA_TOOL_OPTIONS, for -XX:MaxHeapSize as for -Xmx.
  r = jvm("java\0-XX:MaxHeapSize=3g\0Main", {all[1], all[2]});
  EXPECT_EQ(r.heap_bytes, 3 * gib);
  EXPECT_EQ(r.thp_flag_source, "JDK_JAVA_OPTIONS");
  r = jvm("java\0Main", {all[2], all[1]});
  EXPECT_EQ(r.heap_bytes, 2 * gib);
  // JDK_JAVA_OPTIONS is the java launcher's only.
  EXPECT_EQ(jvm("keytool\0-genkeypair", {all[1], all[2]}).heap_bytes, 1 * gib);
  const jvm_options read = read_jvm_options(cmdline_of("java\0-Xmx3g\0Main\0-Xmx9g"), all);
  std::vector<std::string> order;
  for (const jvm_option& o : read.options) order.push_back(o.text + "@" + name_of(o.source));
  EXPECT_EQ(order, (std::vector<std::string>{
                       "-Xmx1g@JAVA_TOOL_OPTIONS", "-XX:+UseTransparentHugePages@JAVA_TOOL_OPTIONS",
                       "-Xmx2g@JDK_JAVA_OPTIONS", "-XX:+UseTransparentHugePages@JDK_JAVA_OPTIONS",
                       "-Xmx3g@the command line", "-Xmx4g@_JAVA_OPTIONS",
                       "-XX:-UseTransparentHugePages@_JAVA_OPTIONS"}));
}

TEST(DoctorJvmOptions, AdviceNamesTheVariableThatWins) {
  process_report p = big_process("glibc", {}, "2.36");
  // -XX:- on the command line: JAVA_TOOL_OPTIONS would be read first and lose.
  p.runtime = jvm("java\0-XX:-UseTransparentHugePages\0-Xmx1g\0Main");
  auto list = advise_process(p, healthy_system());
  advice a = only(list, "jvm_without_thp");
  EXPECT_EQ(a.commands,
            std::vector<std::string>{"export _JAVA_OPTIONS=-XX:+UseTransparentHugePages"});
  EXPECT_NE(a.message.find("-XX:-UseTransparentHugePages from the command line, which a flag in "
                           "JAVA_TOOL_OPTIONS cannot override"),
            std::string::npos)
      << a.message;
  EXPECT_NE(a.message.find("remove it from the command line"), std::string::npos) << a.message;
  // From JAVA_TOOL_OPTIONS, or none at all: JAVA_TOOL_OPTIONS, where the later flag wins.
  p.runtime = jvm("java\0-Xmx1g\0Main");
  EXPECT_EQ(only(advise_process(p, healthy_system()), "jvm_without_thp").commands,
            std::vector<std::string>{"export JAVA_TOOL_OPTIONS=-XX:+UseTransparentHugePages"});
}

}  // namespace
}  // namespace hugepage::doctor
