# pkg-config file and Debian package, beside the CMake package config. Included from the
# top-level CMakeLists.txt when HUGEPAGE_INSTALL is on.

# hugepage.pc goes to share/pkgconfig, the place for architecture-independent .pc files: the
# library is headers only. Written at install time so that it names the prefix installed to.
install(CODE "
  set(HUGEPAGE_PC_TEMPLATE \"${PROJECT_SOURCE_DIR}/cmake/hugepage.pc.in\")
  set(HUGEPAGE_PC_STAGING \"${PROJECT_BINARY_DIR}/pkgconfig\")
  set(HUGEPAGE_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(HUGEPAGE_PC_DESTINATION \"${CMAKE_INSTALL_DATADIR}/pkgconfig\")
  set(HUGEPAGE_PC_DESCRIPTION \"${PROJECT_DESCRIPTION}\")
  set(HUGEPAGE_PC_VERSION \"${PROJECT_VERSION}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/install-pkgconfig.cmake\")")

# The license, where Debian looks for it (share/doc/<package>/copyright); other installs get
# the same text at the same place.
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright)

# `cpack -G DEB` in a build tree: one package with the headers, the CMake and pkg-config files,
# hugepage-doctor (when built) and the license, installed under /usr.
set(HUGEPAGE_PACKAGE_MAINTAINER "The hugepage authors" CACHE STRING
    "Maintainer field of the Debian package (\"Name <email>\")")
set(CPACK_PACKAGE_NAME hugepage)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION "A header-only C++17 library that puts big containers on huge pages\n\
(THP on request, hugetlb pools, MADV_COLLAPSE) and reports the backing the\n\
kernel gave; with hugepage-doctor, which checks a system or a process.")
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${HUGEPAGE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # hugepage_<version>-1_<arch>.deb
# Depends from the doctor's shared libraries (libfmt, libstdc++, libc): dpkg-shlibdeps, from
# dpkg-dev. The headers need only the standard library and the Linux headers.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS libpfm4-dev)  # for the optional perf_events_pfm.hpp
include(CPack)
