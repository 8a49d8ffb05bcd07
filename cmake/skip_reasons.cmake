# A normal `ctest` run lists skipped tests without saying why (the reason is in their output,
# which only -V shows): after every run ctest calls cmake/skip_reasons.sh, which prints each
# skipped test's "SKIP: ..." line from ctest's log.
file(WRITE ${CMAKE_BINARY_DIR}/CTestCustom.cmake
  "set(CTEST_CUSTOM_POST_TEST \"bash ${CMAKE_CURRENT_LIST_DIR}/skip_reasons.sh ${CMAKE_BINARY_DIR}\")\n")
