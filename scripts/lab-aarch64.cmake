# Cross toolchain of scripts/lab's arm64 builds: Debian's aarch64-linux-gnu-g++ and a sysroot of
# the host suite's arm64 -dev packages extracted by scripts/lab (LAB_SYSROOT).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(LAB_SYSROOT "" CACHE PATH "the arm64 sysroot scripts/lab extracted")
# The compiler keeps its own glibc and libstdc++ (/usr/aarch64-linux-gnu); the sysroot adds the
# libraries and CMake packages (absl, GTest, fmt, nlohmann_json, CLI11).
set(CMAKE_FIND_ROOT_PATH ${LAB_SYSROOT} /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CXX_FLAGS_INIT "-isystem ${LAB_SYSROOT}/usr/include")
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "-L${LAB_SYSROOT}/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,${LAB_SYSROOT}/usr/lib/aarch64-linux-gnu")
