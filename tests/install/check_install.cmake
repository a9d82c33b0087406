# Installs the built specdec into a scratch prefix, then configures, builds (in CONSUMER_BUILD_TYPE)
# and runs a consumer project that finds it with find_package(specdec), and builds and runs the
# consumer again with the compiler alone (README, "Without CMake").
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${SPECDEC_BUILD_DIR} --prefix ${WORK_DIR}/prefix
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build
  -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=${CONSUMER_BUILD_TYPE} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed (${rc})")
endif()
foreach(program consumer consumer_conformance consumer_host_model)
  execute_process(COMMAND ${WORK_DIR}/build/${program} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${program} failed (${rc})")
  endif()
endforeach()

# Without CMake: the prefix's include/ is the only path a header-only user needs (the README's
# command, without optimisation: what it checks is that the consumer builds and runs).
execute_process(COMMAND ${CXX_COMPILER} -std=c++20 -ffp-contract=off -I${WORK_DIR}/prefix/include
                        ${CONSUMER_SOURCE_DIR}/consumer.cpp -o ${WORK_DIR}/consumer_without_cmake RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "compiling the consumer with ${CXX_COMPILER} -I<prefix>/include alone failed (${rc})")
endif()
execute_process(COMMAND ${WORK_DIR}/consumer_without_cmake RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer_without_cmake failed (${rc})")
endif()

# The installed specbench reads its default EAGLE head and draft model from the prefix, not from
# the source tree (bench/specbench/resource_paths.hpp).
if(EXISTS ${WORK_DIR}/prefix/bin/specbench)
  foreach(file share/specdec/eagle/stories260K.eagle share/specdec/draft_model/stories260K-draft.bin)
    if(NOT EXISTS ${WORK_DIR}/prefix/${file})
      message(FATAL_ERROR "${file} is not installed")
    endif()
  endforeach()
  execute_process(COMMAND ${WORK_DIR}/prefix/bin/specbench model --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  foreach(file share/specdec/eagle/stories260K.eagle share/specdec/draft_model/stories260K-draft.bin)
    string(FIND "${help}" "${WORK_DIR}/prefix/${file}" at)
    if(rc OR at EQUAL -1)
      message(FATAL_ERROR "the installed specbench does not default to ${WORK_DIR}/prefix/${file}:\n${help}")
    endif()
  endforeach()
endif()
