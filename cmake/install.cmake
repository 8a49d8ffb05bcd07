# Installation: headers, shared + static library, pkg-config files (librpma, and librpma-static
# for the archive) and a CMake package
# (find_package(rpma) -> rpma::rpma for the shared library, rpma::rpma_static for the archive).
# Install components: Runtime (librpma.so.0*) and Development (everything else); the Debian
# packages librpma0 and librpma-dev are made of them (cmake/package.cmake).
include(CMakePackageConfigHelpers)

set(RPMA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rpma)

install(FILES ${CMAKE_SOURCE_DIR}/include/librpma.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT Development)

# The archive holds C++ objects: a C program linking it also needs the C++ runtime, which CMake
# does not record for a library made only of object-library objects. Take the libraries the C++
# compiler adds on its own beyond the C compiler's (libstdc++, libm with GCC).
set(RPMA_CXX_RUNTIME ${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES})
if(CMAKE_C_IMPLICIT_LINK_LIBRARIES)
  list(REMOVE_ITEM RPMA_CXX_RUNTIME ${CMAKE_C_IMPLICIT_LINK_LIBRARIES})
endif()
foreach(lib ${RPMA_CXX_RUNTIME})
  target_link_libraries(rpma_static INTERFACE $<INSTALL_INTERFACE:$<LINK_ONLY:${lib}>>)
  string(APPEND RPMA_PC_LIBS_PRIVATE " -l${lib}")
endforeach()

install(TARGETS rpma rpma_static EXPORT rpmaTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT rpmaTargets NAMESPACE rpma:: DESTINATION ${RPMA_CMAKE_DIR} COMPONENT Development)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/rpmaConfig.cmake.in
  ${CMAKE_BINARY_DIR}/rpmaConfig.cmake INSTALL_DESTINATION ${RPMA_CMAKE_DIR})
# 1.x releases are compatible with each other, as upstream's soname 0 promises.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/rpmaConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/rpmaConfig.cmake ${CMAKE_BINARY_DIR}/rpmaConfigVersion.cmake
  DESTINATION ${RPMA_CMAKE_DIR} COMPONENT Development)

# The .pc file finds its prefix from its own location, so `cmake --install --prefix DIR` works
# without reconfiguring. GNUInstallDirs may give relative or absolute directories.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(RPMA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _rpma_up /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" _rpma_up "${_rpma_up}")
  set(RPMA_PC_PREFIX "\${pcfiledir}/${_rpma_up}")
endif()
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(RPMA_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(RPMA_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
# librpma.h includes <infiniband/verbs.h>: its folder, unless the compiler searches it anyway.
set(RPMA_PC_IBVERBS_CFLAGS "")
if(NOT IBVERBS_INCLUDE_DIR IN_LIST CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES)
  set(RPMA_PC_IBVERBS_CFLAGS " -I${IBVERBS_INCLUDE_DIR}")
endif()
foreach(pc librpma librpma-static)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
    COMPONENT Development)
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/man.cmake)  # docs/man pages (COMPONENT Development)

include(${CMAKE_CURRENT_LIST_DIR}/package.cmake)
