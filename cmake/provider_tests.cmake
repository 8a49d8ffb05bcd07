# Suites that run once per provider. rpma_provider_tests(NAME), called near the top of a
# directory's CMakeLists.txt, gives every test that directory defines (wherever in the file) the
# label NAME and RPMA_PROVIDER=NAME in its environment, so `ctest -L tcp` runs one provider's
# suite. A test that sets RPMA_PROVIDER itself keeps its own value and gets no label.
# (CMake < 3.28 cannot set properties of tests in other directories, hence one call per directory.)
function(rpma_provider_tests provider)
  cmake_language(EVAL CODE
    "cmake_language(DEFER CALL _rpma_tag_provider_tests [[${provider}]])")
endfunction()

function(_rpma_tag_provider_tests provider)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} ENVIRONMENT env)
    if(NOT env MATCHES "(^|;)RPMA_PROVIDER=")
      set_property(TEST ${t} APPEND PROPERTY LABELS ${provider})
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT RPMA_PROVIDER=${provider})
    endif()
  endforeach()
endfunction()
