# Man pages (docs/man): one per function in section 3, librpma(7) and rpma-perf(1). They are
# checked in as roff, so installing needs no tool; tests/man checks them. Debian's librpma-dev
# holds the same section 3 and 7 pages, which is why they belong to the Development component;
# rpma-perf(1) goes with the program (component Tools, package rpma-tools).
foreach(section 3 7)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/man/man${section}/
    DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
    COMPONENT Development
    FILES_MATCHING PATTERN "*.${section}")
endforeach()
if(TARGET rpma-perf)
  install(FILES ${CMAKE_SOURCE_DIR}/docs/man/man1/rpma-perf.1
    DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT Tools)
endif()
