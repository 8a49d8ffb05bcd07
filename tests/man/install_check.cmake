# Installs the Development component into a scratch prefix and checks that every man page lands
# under the GNUInstallDirs mandir (the Debian package librpma-dev is made of that component).
# cmake -DBUILD=<build dir> -DPREFIX=<scratch dir> -DMANDIR=<CMAKE_INSTALL_MANDIR> -DSRC=<docs/man>
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} --component Development
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install --component Development failed (${rc}); is the library built?")
endif()
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
