# Man pages (docs/man): one per function in section 3, librpma(7) and rpma-perf(1). They are
# checked in as roff, so installing needs no tool; tests/man checks them. Debian's librpma-dev
# holds the same pages, which is why they belong to the Development component.
foreach(section 1 3 7)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/man/man${section}/
    DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
    COMPONENT Development
    FILES_MATCHING PATTERN "*.${section}")
endforeach()
