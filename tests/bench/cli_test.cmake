# specdec_cli_test(TEST_NAME EXE target LABEL label CODE n [ONE_LINE_STDERR] [ARGS ...] [STDOUT re]
#                  [STDERR re] [REQUIRES file...] [JSON file [JSON_KEYS path...] [JSON_EQUAL path=value...]]
#                  [FILE_MATCHES file=re] [SETUP fixture] [NEEDS fixture...])
# The test of one command line of a specdec tool: run_specbench.cmake (next to this file) runs the
# target's binary with ARGS and checks its exit code and output; its comment says what each option
# checks. A later EXE overrides an earlier one, so a wrapper can give a default. SETUP: the test
# writes the files of that fixture; NEEDS: the fixtures it reads.
function(specdec_cli_test name)
  cmake_parse_arguments(T "ONE_LINE_STDERR" "EXE;LABEL;CODE;STDOUT;STDERR;JSON;FILE_MATCHES;SETUP"
                        "ARGS;REQUIRES;NEEDS;JSON_KEYS;JSON_EQUAL" ${ARGN})
  string(REPLACE ";" "|" args "${T_ARGS}")
  set(defines -DEXE=$<TARGET_FILE:${T_EXE}> -DARGS=${args} -DEXPECT_CODE=${T_CODE}
              -DDEFAULT_DATA_DIR=${SPECDEC_DEFAULT_DATA_DIR} -DONE_LINE_STDERR=${T_ONE_LINE_STDERR})
  if(T_REQUIRES)
    string(REPLACE ";" "|" requires "${T_REQUIRES}")
    list(APPEND defines -DREQUIRES=${requires})
  endif()
  foreach(stream STDOUT STDERR)
    if(DEFINED T_${stream})
      list(APPEND defines "-DEXPECT_${stream}=${T_${stream}}")
    endif()
  endforeach()
  if(T_JSON)
    string(REPLACE ";" "|" keys "${T_JSON_KEYS}")
    string(REPLACE ";" "|" equal "${T_JSON_EQUAL}")
    list(APPEND defines -DJSON=${T_JSON} -DJSON_KEYS=${keys} -DJSON_EQUAL=${equal})
  endif()
  if(DEFINED T_FILE_MATCHES)
    list(APPEND defines "-DFILE_MATCHES=${T_FILE_MATCHES}")
  endif()
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} ${defines} -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/run_specbench.cmake)
  set_tests_properties(${name} PROPERTIES LABELS ${T_LABEL} SKIP_REGULAR_EXPRESSION "specdec-skip:")
  if(T_SETUP)
    set_tests_properties(${name} PROPERTIES FIXTURES_SETUP ${T_SETUP})
  endif()
  if(T_NEEDS)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${T_NEEDS}")
  endif()
endfunction()
