// tools/doctor/test_hook.cpp - see test_hook.hpp.
#include "test_hook.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace hugepage::doctor {

void test_hook() {
  const char* fd_text = std::getenv("HUGEPAGE_DOCTOR_TEST_HOOK_FD");
  if (fd_text == nullptr) return;
  const int fd = std::atoi(fd_text);
  struct stat st {};
  if (fd <= STDERR_FILENO || ::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return;
  char byte = 'r';
  if (::write(fd, &byte, 1) == 1) (void)!::read(fd, &byte, 1);
}

}  // namespace hugepage::doctor
