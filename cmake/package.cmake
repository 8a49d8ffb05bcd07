# Debian packages with CPack: `cpack -G DEB` in the build folder (or `cmake --build build --target
# package`) makes the two binary packages Debian builds from upstream librpma, under the same names,
# and one for the tools:
#   librpma0     install component Runtime: librpma.so.0*
#   librpma-dev  install component Development: librpma.h, librpma.so, librpma.a, librpma.pc,
#                librpma-static.pc, the CMake package and the man pages of sections 3 and 7
#   rpma-tools   install component Tools: rpma-perf and rpma-perf(1) (a name of our own: Debian
#                has no tools package for librpma)
# Sharing Debian's names is what makes them replace Debian's packages: dpkg and apt see another
# version of librpma0 and librpma-dev (1.3.0-1 against bookworm's 1.2.0-1), so installing them
# upgrades Debian's and removes its files. Replaces/Conflicts/Provides naming the packages
# themselves would mean nothing (lintian: package-relation-with-self), hence there are none.
# Each package also gets /usr/share/doc/<package>/{copyright,changelog.Debian.gz} (components
# RuntimeDebDoc and DevelopmentDebDoc, which only CPack installs) and a lintian overrides file
# (cmake/deb/*.lintian-overrides, each override with its reason).
# Configured with -DCMAKE_INSTALL_PREFIX=/usr the library goes to Debian's multiarch folder
# (/usr/lib/x86_64-linux-gnu), as in Debian's packages; otherwise to /usr/lib.
# Included from cmake/install.cmake, after every install() rule.

set(RPMA_DEB_REVISION 1 CACHE STRING "Debian revision of the packages (VERSION-REVISION)")
set(RPMA_DEB_MAINTAINER "rpma maintainers <maintainers@users.noreply.a-seed-bb08f6b6.example>"
  CACHE STRING "Maintainer field of the Debian packages")
set(RPMA_DEB_VERSION ${PROJECT_VERSION}-${RPMA_DEB_REVISION})
set(RPMA_DEB_DOC ${CMAKE_INSTALL_DATAROOTDIR}/doc)
set(RPMA_DEB_DIR ${CMAKE_BINARY_DIR}/deb)

# --- files only the packages carry -------------------------------------------------------------
# The changelog must be gzip -9n compressed (no name, no time stamp: reproducible) and its first
# entry must name the package's version.
find_program(RPMA_GZIP gzip)
# The date is the configure time, or SOURCE_DATE_EPOCH when set (string(TIMESTAMP) honours it).
string(TIMESTAMP RPMA_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/changelog.in ${RPMA_DEB_DIR}/changelog @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/copyright ${RPMA_DEB_DIR}/copyright COPYONLY)
if(RPMA_GZIP)
  execute_process(COMMAND ${RPMA_GZIP} -9nc ${RPMA_DEB_DIR}/changelog
    OUTPUT_FILE ${RPMA_DEB_DIR}/changelog.Debian.gz RESULT_VARIABLE _rpma_gz)
  if(NOT _rpma_gz EQUAL 0)
    message(FATAL_ERROR "gzip ${RPMA_DEB_DIR}/changelog failed")
  endif()
endif()

foreach(pkg librpma0 librpma-dev rpma-tools)
  if(pkg STREQUAL "librpma0")
    set(comp RuntimeDebDoc)
  elseif(pkg STREQUAL "rpma-tools")
    set(comp ToolsDebDoc)
  else()
    set(comp DevelopmentDebDoc)
  endif()
  # EXCLUDE_FROM_ALL: `cmake --install` leaves them out; CPack installs each component by name
  if(RPMA_GZIP)
    install(FILES ${RPMA_DEB_DIR}/changelog.Debian.gz DESTINATION ${RPMA_DEB_DOC}/${pkg}
      COMPONENT ${comp} EXCLUDE_FROM_ALL)
  endif()
  install(FILES ${RPMA_DEB_DIR}/copyright DESTINATION ${RPMA_DEB_DOC}/${pkg}
    COMPONENT ${comp} EXCLUDE_FROM_ALL)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/deb/${pkg}.lintian-overrides)
    install(FILES ${CMAKE_CURRENT_LIST_DIR}/deb/${pkg}.lintian-overrides
      DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME ${pkg}
      COMPONENT ${comp} EXCLUDE_FROM_ALL)
  endif()
endforeach()

# CPACK_STRIP_FILES strips the shared library but not the archive: take the debug information out
# of the archive as dh_strip does, and the .comment section out of both.
if(NOT IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" AND CMAKE_STRIP)
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug --enable-deterministic-archives
        --remove-section=.comment \"\${_dir}/$<TARGET_FILE_NAME:rpma_static>\")
    endif()" COMPONENT Development)
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
      execute_process(COMMAND \"${CMAKE_STRIP}\" --remove-section=.comment
        \"\${_dir}/$<TARGET_FILE_NAME:rpma>\")
    endif()" COMPONENT Runtime)
endif()

# --- CPack -------------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rpma)
set(CPACK_PACKAGE_VENDOR "rpma")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${RPMA_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_STRIP_FILES ON)
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/deb/compress-man.cmake)

set(CPACK_COMPONENTS_ALL Runtime RuntimeDebDoc Development DevelopmentDebDoc)
if(TARGET rpma-perf)
  list(APPEND CPACK_COMPONENTS_ALL Tools ToolsDebDoc)
endif()
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENT_RUNTIME_GROUP libs)
set(CPACK_COMPONENT_RUNTIMEDEBDOC_GROUP libs)
set(CPACK_COMPONENT_DEVELOPMENT_GROUP dev)
set(CPACK_COMPONENT_DEVELOPMENTDEBDOC_GROUP dev)
set(CPACK_COMPONENT_TOOLS_GROUP tools)
set(CPACK_COMPONENT_TOOLSDEBDOC_GROUP tools)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)            # NAME_VERSION-REVISION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE ${RPMA_DEB_REVISION})
set(CPACK_DEBIAN_PACKAGE_SOURCE rpma)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)

# Debian's packages are Multi-Arch: same; CPack 3.25 cannot write that field, so these are not.
if(CMAKE_LIBRARY_ARCHITECTURE AND NOT CMAKE_INSTALL_LIBDIR STREQUAL "lib/${CMAKE_LIBRARY_ARCHITECTURE}")
  message(STATUS "Debian packages: the library goes to /usr/${CMAKE_INSTALL_LIBDIR}; "
    "configure with -DCMAKE_INSTALL_PREFIX=/usr for /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}")
endif()

# CPackDeb puts CPACK_PACKAGE_DESCRIPTION_SUMMARY in front of every package's description unless
# it is CPack's default; left at the default, each package's synopsis is the first line of its own
# description below (the two packages must not share one).
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(_rpma_deb_about "rpma is a drop-in replacement for librpma 1.3 (Remote Persistent Memory
Access) that carries RDMA semantics over plain TCP, so it needs no RDMA
hardware: remote write, read, flush, atomic write and messaging work over
any IP network, loopback included. It keeps librpma's C API and ABI
(soname librpma.so.0, symbols at version LIBRPMA_1.0).")

# librpma0: the shared library. dpkg-shlibdeps finds its dependencies (libc6, libstdc++6,
# libgcc-s1). The shlibs and symbols files make programs built against it depend on
# librpma0 (>= 1.3.0), the first version with the whole 1.3 API; the ldconfig trigger is Debian's
# way to refresh the linker cache (CPack adds postinst/postrm calling ldconfig as well).
set(CPACK_DEBIAN_LIBS_PACKAGE_NAME librpma0)
set(CPACK_DEBIAN_LIBS_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBS_DESCRIPTION "remote persistent memory access library over TCP
${_rpma_deb_about}

This package contains the shared library.")
# (CPackDeb runs `file` to find the shared objects it hands to dpkg-shlibdeps)
find_program(RPMA_DPKG_SHLIBDEPS dpkg-shlibdeps)
find_program(RPMA_FILE file)
if(RPMA_DPKG_SHLIBDEPS AND RPMA_FILE)
  set(CPACK_DEBIAN_LIBS_PACKAGE_SHLIBDEPS ON)
else()
  message(STATUS "dpkg-shlibdeps or file not found (packages dpkg-dev, file): "
    "librpma0's Depends are fixed")
  set(CPACK_DEBIAN_LIBS_PACKAGE_DEPENDS
    "libc6 (>= 2.34), libgcc-s1 (>= 3.3.1), libstdc++6 (>= 12), libibverbs1 (>= 44), librdmacm1 (>= 44)")
endif()
# symbols: every exported function of the version script, at LIBRPMA_1.0
file(STRINGS ${RPMA_MAP} _rpma_map_lines REGEX "^[ \t]+rpma_[a-z0-9_]+;")
set(_rpma_symbols "librpma.so.0 librpma0 #MINVER#\n* Build-Depends-Package: librpma-dev\n")
string(APPEND _rpma_symbols " LIBRPMA_1.0@LIBRPMA_1.0 ${PROJECT_VERSION}\n")
foreach(line ${_rpma_map_lines})
  string(REGEX REPLACE "^[ \t]+(rpma_[a-z0-9_]+);.*" "\\1" fn "${line}")
  string(APPEND _rpma_symbols " ${fn}@LIBRPMA_1.0 ${PROJECT_VERSION}\n")
endforeach()
file(WRITE ${RPMA_DEB_DIR}/control/symbols "${_rpma_symbols}")
file(WRITE ${RPMA_DEB_DIR}/control/shlibs "librpma 0 librpma0 (>= ${PROJECT_VERSION})\n")
file(WRITE ${RPMA_DEB_DIR}/control/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_LIBS_PACKAGE_CONTROL_EXTRA ${RPMA_DEB_DIR}/control/shlibs
  ${RPMA_DEB_DIR}/control/symbols ${RPMA_DEB_DIR}/control/triggers)

# librpma-dev: librpma.h includes <infiniband/verbs.h>, hence libibverbs-dev; librdmacm-dev for
# a static link (the verbs provider).
set(CPACK_DEBIAN_DEV_PACKAGE_NAME librpma-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "librpma0 (= ${RPMA_DEB_VERSION}), libibverbs-dev, librdmacm-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION "remote persistent memory access library over TCP (development)
${_rpma_deb_about}

This package contains the header, the static library, the pkg-config file,
the CMake package and the man pages.")

# rpma-tools: rpma-perf, built against this very librpma0. dpkg-shlibdeps cannot resolve
# librpma.so.0 before librpma0 is installed, so the Depends are written out.
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME rpma-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "librpma0 (= ${RPMA_DEB_VERSION}), libc6 (>= 2.34)")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "remote persistent memory access library over TCP (tools)
${_rpma_deb_about}

This package contains rpma-perf, which measures, soak-tests and
demonstrates rpma over the network or the loopback address.")

include(CPack)
