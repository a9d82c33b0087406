# The test suite's build (SPECDEC_TEST_BUILD, GCC): the headers every program parses,
# precompiled/programs.hpp (the standard headers, the x86-64 intrinsics, {fmt}), are parsed once
# instead of in each translation unit (2 to 4 s of CPU each). Included at the end of the top-level
# CMakeLists.txt, when every target exists.
#
# GCC uses a precompiled header only where it was made with the same macros and flags, so it is
# made two ways: with SPECDEC_WARNINGS (which files without them can use too: -Wpedantic only
# undefines a macro), and with them and {fmt}'s FMT_SHARED. Both lie in one directory,
# <header>.gch/, of which GCC takes the first that fits the file being compiled (-Winvalid-pch
# names those it passes over, and why). A target gets the header (-include) when it compiles C++
# with the build's flags: not at another -O level (GCC crashed on an -Og header used at -O3), not
# with a sanitizer or position-independent code, and not with a precompiled header of its own
# (the Catch2 tests, tests/CMakeLists.txt).

set(specdec_pch_header ${CMAKE_BINARY_DIR}/precompiled/programs.hpp)
file(CONFIGURE OUTPUT ${specdec_pch_header}
  CONTENT "#include \"${PROJECT_SOURCE_DIR}/cmake/precompiled/programs.hpp\"\n")
file(MAKE_DIRECTORY ${specdec_pch_header}.gch)
set_source_files_properties(${specdec_pch_header} PROPERTIES LANGUAGE CXX)

find_package(fmt QUIET)
set(specdec_pch_variants warnings)
if(TARGET fmt::fmt)
  list(APPEND specdec_pch_variants fmt_shared)
endif()

set(specdec_pch_files "")
foreach(variant IN LISTS specdec_pch_variants)
  set(owner specdec_pch_${variant})
  add_library(${owner} OBJECT EXCLUDE_FROM_ALL ${specdec_pch_header})
  target_link_libraries(${owner} PRIVATE specdec)
  target_compile_options(${owner} PRIVATE -x c++-header)
  if(variant STREQUAL "fmt_shared")
    target_link_libraries(${owner} PRIVATE fmt::fmt)
  elseif(TARGET fmt::fmt)
    target_include_directories(${owner} SYSTEM PRIVATE $<TARGET_PROPERTY:fmt::fmt,INTERFACE_INCLUDE_DIRECTORIES>)
  endif()
  target_compile_options(${owner} PRIVATE ${SPECDEC_WARNINGS})
  # The object file is the precompiled header; GCC finds it by its place in <header>.gch/.
  set(file ${specdec_pch_header}.gch/${variant}.gch)
  add_custom_command(OUTPUT ${file}
    COMMAND ${CMAKE_COMMAND} -E create_symlink $<TARGET_OBJECTS:${owner}> ${file}
    DEPENDS ${owner} VERBATIM)
  list(APPEND specdec_pch_files ${file})
endforeach()
add_custom_target(specdec_pch DEPENDS ${specdec_pch_files})

function(specdec_pch_targets_in dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    specdec_pch_targets_in(${subdir} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# A target's own -O option other than -Og (the test build's level, which the tools name again in
# SPECDEC_TOOL_OPTIMIZATION) keeps it out, as does a directory whose flags differ from these.
string(TOUPPER "${CMAKE_BUILD_TYPE}" specdec_pch_config)
specdec_pch_targets_in(${PROJECT_SOURCE_DIR} specdec_pch_candidates)
foreach(target IN LISTS specdec_pch_candidates)
  get_target_property(type ${target} TYPE)
  get_target_property(sources ${target} SOURCES)
  get_target_property(options ${target} COMPILE_OPTIONS)
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_property(own_pch TARGET ${target} PROPERTY PRECOMPILE_HEADERS SET)
  get_property(reused_pch TARGET ${target} PROPERTY PRECOMPILE_HEADERS_REUSE_FROM SET)
  get_target_property(no_pch ${target} DISABLE_PRECOMPILE_HEADERS)
  get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
  get_directory_property(flags DIRECTORY ${source_dir} DEFINITION CMAKE_CXX_FLAGS)
  get_directory_property(config_flags DIRECTORY ${source_dir} DEFINITION CMAKE_CXX_FLAGS_${specdec_pch_config})
  if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$" OR NOT "${sources}" MATCHES "\\.(cpp|cxx|cc)(;|$)"
     OR own_pch OR reused_pch OR no_pch OR pic
     OR "${options}" MATCHES "(^|[;:])(-O[^g]|-fsanitize|-fPIC|-fpic|-fPIE|-fpie|-ffp-contract=(fast|on)|-m[a-z])"
     OR NOT "${flags}" STREQUAL "${CMAKE_CXX_FLAGS}"
     OR NOT "${config_flags}" STREQUAL "${CMAKE_CXX_FLAGS_${specdec_pch_config}}")
    continue()
  endif()
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${specdec_pch_header}>")
  add_dependencies(${target} specdec_pch)
endforeach()
