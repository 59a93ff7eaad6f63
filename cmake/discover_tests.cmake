# hugepage_discover_tests(TARGET [LABELS label...]): gtest_discover_tests with ctest labels.
#
# gtest_discover_tests(... PROPERTIES LABELS "a;b") keeps only the first label on CMake 3.25: the
# list is flattened into the generated set_tests_properties call, where "b" reads as a property
# name. So the labels are set by an include file of our own, read by ctest after the discovered
# tests' file, from the test list that discovery leaves in <TARGET>_TESTS.
include(GoogleTest)

function(hugepage_discover_tests target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "LABELS")
  # A cross build (scripts/lab's arm64 one) cannot run its executables on the host: their tests
  # are listed when ctest runs, on the target.
  set(mode POST_BUILD)
  if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
    set(mode PRE_TEST)
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 TEST_LIST ${target}_TESTS
                       DISCOVERY_MODE ${mode})
  if(NOT arg_LABELS)
    return()
  endif()
  set(file "${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake")
  file(WRITE "${file}"
       "if(${target}_TESTS)\n"
       "  set_tests_properties(\${${target}_TESTS} PROPERTIES LABELS \"${arg_LABELS}\")\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${file}")
endfunction()
