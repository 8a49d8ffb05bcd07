# Suites that run once per provider. rpma_provider_tests(P1 [P2...]), called near the top of a
# directory's CMakeLists.txt, gives every test that directory defines (wherever in the file) the
# label P1 and RPMA_PROVIDER=P1 in its environment, and adds a copy NAME.P2 of it with the label
# P2 and RPMA_PROVIDER=P2 (and so on), so `ctest -L shm` runs one provider's suite. The copies
# share a RESOURCE_LOCK with their original: they use the same ports. A test that sets
# RPMA_PROVIDER itself keeps its own value, gets no label and no copy; one labelled tcp-only
# (it speaks or intercepts the tcp wire) gets the first provider's label and no copy.
# (CMake < 3.28 cannot set properties of tests in other directories, hence one call per directory.)

# add_test, recording a NAME-form test's arguments where copies are wanted, so the copy runs the
# same command.
function(add_test)
  _add_test(${ARGV})
  get_property(copies DIRECTORY PROPERTY RPMA_PROVIDER_COPIES SET)
  if(copies AND ARGV0 STREQUAL "NAME")
    set_property(DIRECTORY PROPERTY "RPMA_TEST_ARGS_${ARGV1}" "${ARGV}")
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
    get_property(args DIRECTORY PROPERTY "RPMA_TEST_ARGS_${t}")
    if(NOT args OR NOT others OR "tcp-only" IN_LIST labels)
      continue()
    endif()
    set_property(TEST ${t} APPEND PROPERTY RESOURCE_LOCK ${t})
    list(REMOVE_AT args 0 1)
    foreach(p IN LISTS others)
      _add_test(NAME ${t}.${p} ${args})
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
