# Installs the Development and Tools components into a scratch prefix and checks that every man
# page lands under the GNUInstallDirs mandir: sections 3 and 7 with Development (the Debian
# package librpma-dev), rpma-perf(1) with Tools (rpma-tools).
# cmake -DBUILD=<build dir> -DPREFIX=<scratch dir> -DMANDIR=<CMAKE_INSTALL_MANDIR> -DSRC=<docs/man>
file(REMOVE_RECURSE ${PREFIX})
foreach(comp Development Tools)
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} --component ${comp}
    RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "cmake --install --component ${comp} failed (${rc}); is everything built?")
  endif()
endforeach()
if(IS_ABSOLUTE "${MANDIR}")
  set(dir ${MANDIR})
else()
  set(dir ${PREFIX}/${MANDIR})
endif()
foreach(section 1 3 7)
  file(GLOB want RELATIVE ${SRC}/man${section} ${SRC}/man${section}/*.${section})
  file(GLOB got RELATIVE ${dir}/man${section} ${dir}/man${section}/*.${section})
  list(LENGTH want n)
  if(n EQUAL 0 OR NOT want STREQUAL got)
    message(FATAL_ERROR "man${section}: installed [${got}], expected [${want}]")
  endif()
  message(STATUS "man${section}: ${n} pages in ${dir}/man${section}")
endforeach()
file(REMOVE_RECURSE ${PREFIX})
