// tools/test/count_opens.cpp - an LD_PRELOAD library for doctor_cli_test: counts how often a
// program opens one file, without tracing it.
//
// HUGEPAGE_COUNT_OPENS_PATH names the file and HUGEPAGE_COUNT_OPENS_FD a descriptor the program
// inherited. Every open of that file through open, openat or fopen (and their 64-bit names)
// writes 'o' to it, and every open of a file under it by a path that names it ("/proc/42/status"
// under "/proc/42") writes 'a'. A path relative to a directory descriptor is resolved through
// /proc/self/fd first, so that openat(dir of /proc/42, "smaps") counts as /proc/42/smaps and not
// as 'a'. Opens inside libc that do not go through these symbols are not seen; the doctor opens
// /proc files with open() and openat().
#undef _FORTIFY_SOURCE  // its inline open() wrappers would clash with the definitions below
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void write_byte(char byte) {
  const char* fd = std::getenv("HUGEPAGE_COUNT_OPENS_FD");
  if (fd != nullptr) (void)!::write(std::atoi(fd), &byte, 1);
}

// `path` as opened relative to `dir` (AT_FDCWD: as given).
void note_at(int dir, const char* path) {
  const char* wanted = std::getenv("HUGEPAGE_COUNT_OPENS_PATH");
  if (path == nullptr || wanted == nullptr) return;
  char resolved[4096];
  const char* full = path;
  if (path[0] != '/' && dir != AT_FDCWD) {
    char link[64];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", dir);
    const ssize_t n = ::readlink(link, resolved, sizeof resolved - 1);
    if (n <= 0) return;
    resolved[n] = '\0';
    if (std::snprintf(resolved + n, sizeof resolved - static_cast<std::size_t>(n), "/%s", path) <
        0) {
      return;
    }
    full = resolved;
  }
  // "/proc/42/" is the directory "/proc/42" itself.
  const std::size_t length = std::strlen(wanted);
  if (std::strncmp(full, wanted, length) != 0) return;
  if (full[length] == '\0' || std::strcmp(full + length, "/") == 0) {
    write_byte('o');
  } else if (full == path && full[length] == '/') {
    write_byte('a');
  }
}

void note(const char* path) { note_at(AT_FDCWD, path); }

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
  note_at(dir, path);
  static const auto real = next<int (*)(int, const char*, int, ...)>("openat");
  return real(dir, path, flags, mode);
}

int openat64(int dir, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const int mode = mode_of(flags, ap);
  va_end(ap);
  note_at(dir, path);
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
