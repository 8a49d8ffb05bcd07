# Suites that run once per provider. rpma_provider_tests(P1 [P2...]), called near the top of a
# directory's CMakeLists.txt, gives every test that directory defines (wherever in the file) the
# label P1 and RPMA_PROVIDER=P1 in its environment, and adds a copy NAME.P2 of it with the label
# P2 and RPMA_PROVIDER=P2 (and so on), so `ctest -L shm` runs one provider's suite. The copies
# share a RESOURCE_LOCK with their original: they use the same ports. A test that sets
# RPMA_PROVIDER itself keeps its own value, gets no label and no copy; one labelled tcp-only
# (it speaks or intercepts the tcp wire) gets the first provider's label and no copy.
# (CMake < 3.28 cannot set properties of tests in other directories, hence one call per directory.)

# Calls _add_test with the COUNT arguments held in the directory properties PREFIX_0.., quoting each
# so that empty ones survive (a plain ${ARGV} expansion drops them).
function(_rpma_call_add_test prefix count)
  set(code "_add_test(")
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      get_property(a DIRECTORY PROPERTY "${prefix}_${i}")
      string(REPLACE "\\" "\\\\" a "${a}")
      string(REPLACE "\"" "\\\"" a "${a}")
      string(REPLACE "\${" "\\\${" a "${a}")
      string(APPEND code " \"${a}\"")
    endforeach()
  endif()
  cmake_language(EVAL CODE "${code})")
endfunction()

# add_test, recording a NAME-form test's arguments where copies are wanted, so the copy runs the
# same command.
function(add_test)
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE ${last})
    set_property(DIRECTORY PROPERTY "_RPMA_ARG_${i}" "${ARGV${i}}")
  endforeach()
  _rpma_call_add_test(_RPMA_ARG ${ARGC})
  get_property(copies DIRECTORY PROPERTY RPMA_PROVIDER_COPIES SET)
  if(copies AND ARGV0 STREQUAL "NAME")
    foreach(i RANGE ${last})
      set_property(DIRECTORY PROPERTY "RPMA_TEST_ARG_${ARGV1}_${i}" "${ARGV${i}}")
    endforeach()
    set_property(DIRECTORY PROPERTY "RPMA_TEST_ARGC_${ARGV1}" ${ARGC})
  endif()
endfunction()

function(rpma_provider_tests provider)
  set_property(DIRECTORY PROPERTY RPMA_PROVIDER_COPIES "${ARGN}")
  cmake_language(EVAL CODE
    "cmake_language(DEFER CALL _rpma_tag_provider_tests [[${provider}]] [[${ARGN}]])")
endfunction()

set(_RPMA_COPIED_TEST_PROPERTIES TIMEOUT WORKING_DIRECTORY DEPENDS PASS_REGULAR_EXPRESSION
  FAIL_REGULAR_EXPRESSION SKIP_RETURN_CODE WILL_FAIL DISABLED PROCESSORS RUN_SERIAL
  FIXTURES_REQUIRED)

function(_rpma_tag_provider_tests provider others)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} ENVIRONMENT env)
    if(env MATCHES "(^|;)RPMA_PROVIDER=")
      continue()
    endif()
    get_test_property(${t} LABELS labels)
    set_property(TEST ${t} APPEND PROPERTY LABELS ${provider})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT RPMA_PROVIDER=${provider})
    get_property(argc DIRECTORY PROPERTY "RPMA_TEST_ARGC_${t}")
    if(NOT argc OR NOT others OR "tcp-only" IN_LIST labels)
      continue()
    endif()
    set_property(TEST ${t} APPEND PROPERTY RESOURCE_LOCK ${t})
    foreach(p IN LISTS others)
      set_property(DIRECTORY PROPERTY "RPMA_TEST_ARG_${t}_1" "${t}.${p}")
      _rpma_call_add_test("RPMA_TEST_ARG_${t}" ${argc})
      set_property(DIRECTORY PROPERTY "RPMA_TEST_ARG_${t}_1" "${t}")
      foreach(prop IN LISTS _RPMA_COPIED_TEST_PROPERTIES)
        get_test_property(${t} ${prop} v)
        if(NOT v STREQUAL "NOTFOUND")
          set_property(TEST ${t}.${p} PROPERTY ${prop} "${v}")
        endif()
      endforeach()
      if(labels)
        set_property(TEST ${t}.${p} PROPERTY LABELS ${labels})
      endif()
      set_property(TEST ${t}.${p} APPEND PROPERTY LABELS ${p})
      if(env)
        set_property(TEST ${t}.${p} PROPERTY ENVIRONMENT "${env}")
      endif()
      set_property(TEST ${t}.${p} APPEND PROPERTY ENVIRONMENT RPMA_PROVIDER=${p})
      set_property(TEST ${t}.${p} APPEND PROPERTY RESOURCE_LOCK ${t})
    endforeach()
  endforeach()
endfunction()
