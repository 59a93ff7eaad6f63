# Runs at install time (install(CODE) includes it), so that the prefix written into hugepage.pc
# is the one installed to: `cmake --install --prefix P` and CPack's /usr alike, not the
# configure-time CMAKE_INSTALL_PREFIX. Reads HUGEPAGE_PC_* set by the including code.
set(PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
if(IS_ABSOLUTE "${HUGEPAGE_PC_INCLUDEDIR}")
  set(PC_INCLUDEDIR "${HUGEPAGE_PC_INCLUDEDIR}")
else()
  set(PC_INCLUDEDIR "\${prefix}/${HUGEPAGE_PC_INCLUDEDIR}")
endif()
set(PROJECT_DESCRIPTION "${HUGEPAGE_PC_DESCRIPTION}")
set(PROJECT_VERSION "${HUGEPAGE_PC_VERSION}")
configure_file("${HUGEPAGE_PC_TEMPLATE}" "${HUGEPAGE_PC_STAGING}/hugepage.pc" @ONLY)
if(IS_ABSOLUTE "${HUGEPAGE_PC_DESTINATION}")
  set(destination "${HUGEPAGE_PC_DESTINATION}")
else()
  set(destination "${CMAKE_INSTALL_PREFIX}/${HUGEPAGE_PC_DESTINATION}")
endif()
file(INSTALL "${HUGEPAGE_PC_STAGING}/hugepage.pc" DESTINATION "${destination}")
