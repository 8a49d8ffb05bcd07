# CPack pre-build script (CPACK_PRE_BUILD_SCRIPTS, see cmake/package.cmake): Debian wants man
# pages compressed with gzip -9n (no name, no time stamp), as dh_compress does (lintian:
# uncompressed-manual-page). Runs on the staged files of every package before it is built; a
# symbolic link to a page becomes a link to the compressed page.
if(NOT CPACK_GENERATOR STREQUAL "DEB")
  return()
endif()
find_program(_gzip gzip REQUIRED)
file(GLOB_RECURSE _files LIST_DIRECTORIES false "${CPACK_TEMPORARY_DIRECTORY}/*")
foreach(page IN LISTS _files)
  if(NOT page MATCHES "/share/man/(.+/)?man[0-9][^/]*/[^/]+$" OR page MATCHES "\\.gz$")
    continue()
  endif()
  if(IS_SYMLINK "${page}")
    file(READ_SYMLINK "${page}" target)
    file(REMOVE "${page}")
    file(CREATE_LINK "${target}.gz" "${page}.gz" SYMBOLIC)
  else()
    execute_process(COMMAND ${_gzip} -9nf "${page}" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "gzip -9n ${page} failed")
    endif()
  endif()
endforeach()
