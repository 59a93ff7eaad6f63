// tools/test/count_opens.cpp - an LD_PRELOAD library for doctor_cli_test: counts how often a
// program opens one file, without tracing it.
//
// HUGEPAGE_COUNT_OPENS_PATH names the file (the exact path the program passes) and
// HUGEPAGE_COUNT_OPENS_FD a descriptor the program inherited: every open of that path through
// open, openat or fopen (and their 64-bit names) writes one byte to it. Opens inside libc that do
// not go through these symbols are not seen; the doctor opens /proc files with open().
#undef _FORTIFY_SOURCE  // its inline open() wrappers would clash with the definitions below
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void note(const char* path) {
  const char* wanted = std::getenv("HUGEPAGE_COUNT_OPENS_PATH");
  const char* fd = std::getenv("HUGEPAGE_COUNT_OPENS_FD");
  if (path == nullptr || wanted == nullptr || fd == nullptr || std::strcmp(path, wanted) != 0) {
    return;
  }
  const char byte = 'o';
  (void)!::write(std::atoi(fd), &byte, 1);
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

// The mode argument, present only when the flags create a file.
int mode_of(int flags, va_list ap) {
  return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, int) : 0;
}

}  // namespace

extern "C" {

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const int mode = mode_of(flags, ap);
  va_end(ap);
  note(path);
  static const auto real = next<int (*)(const char*, int, ...)>("open");
  return real(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const int mode = mode_of(flags, ap);
  va_end(ap);
  note(path);
  static const auto real = next<int (*)(const char*, int, ...)>("open64");
  return real(path, flags, mode);
}

int openat(int dir, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const int mode = mode_of(flags, ap);
  va_end(ap);
  note(path);
  static const auto real = next<int (*)(int, const char*, int, ...)>("openat");
  return real(dir, path, flags, mode);
}

int openat64(int dir, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const int mode = mode_of(flags, ap);
  va_end(ap);
  note(path);
  static const auto real = next<int (*)(int, const char*, int, ...)>("openat64");
  return real(dir, path, flags, mode);
}

FILE* fopen(const char* path, const char* how) {
  note(path);
  static const auto real = next<FILE* (*)(const char*, const char*)>("fopen");
  return real(path, how);
}

FILE* fopen64(const char* path, const char* how) {
  note(path);
  static const auto real = next<FILE* (*)(const char*, const char*)>("fopen64");
  return real(path, how);
}

}  // extern "C"
