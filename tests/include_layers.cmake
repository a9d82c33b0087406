# Checks that no header includes one of a higher layer (docs/design.md#layers): core/ only
# config.hpp and core/; io/ only config.hpp, error.hpp and io/; models/, index/ and tokenizers/
# nothing of targets/, testing/, the policies or the decoders; step/ (the step engine) none of the facades, targets, testing or
# policies. And no header names a tool's input error (specbench::input_error): the library throws
# specdec::error, which a tool turns into its own. Run with -DINCLUDE_DIR=<the repository's
# include/specdec>.
set(rules
  "core|^(config\\.hpp|core/)"
  "io|^(config|error)\\.hpp|^io/"
  "models|^(config|error)\\.hpp|^(core|io|models)/"
  "index|^(config|error)\\.hpp|^(core|io|index)/"
  "tokenizers|^(config|error)\\.hpp|^(core|io|tokenizers)/"
  "step|^(acceptance_model|backend|concepts|config|draft_budget|draft_tree|error|stats|tree_merger|type_list|verdict)\\.hpp|^(core|step)/")
set(failures "")
foreach(rule IN LISTS rules)
  string(FIND "${rule}" "|" bar)
  string(SUBSTRING "${rule}" 0 ${bar} dir)
  math(EXPR after "${bar} + 1")
  string(SUBSTRING "${rule}" ${after} -1 allowed)
  file(GLOB headers "${INCLUDE_DIR}/${dir}/*")
  foreach(header IN LISTS headers)
    file(STRINGS "${header}" includes REGEX "^#include <specdec/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include <specdec/([^>]*)>.*" "\\1" included "${line}")
      if(NOT included MATCHES "${allowed}")
        get_filename_component(name "${header}" NAME)
        string(APPEND failures "\n  ${dir}/${name} includes specdec/${included}")
      endif()
    endforeach()
  endforeach()
endforeach()
file(GLOB_RECURSE all_headers "${INCLUDE_DIR}/*")
foreach(header IN LISTS all_headers)
  file(STRINGS "${header}" named REGEX "input_error|specbench::")
  if(named)
    file(RELATIVE_PATH name "${INCLUDE_DIR}" "${header}")
    string(APPEND failures "\n  ${name} names a tool's input error")
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR "a header reaches above its layer:${failures}")
endif()
