# The include layering check (cmake/layering.cmake) on small fixture trees:
# a forbidden include fails it, naming the file and the rule, and an allowed
# one passes; and the real tree passes. Registered with ctest as
# layering_forbidden_include_test (label fast); run as
#   cmake -DSB_SOURCE_DIR=SRC -DSB_WORK_DIR=DIR -P tests/layering_test.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT SB_SOURCE_DIR OR NOT SB_WORK_DIR)
  message(FATAL_ERROR "usage: cmake -DSB_SOURCE_DIR=SRC -DSB_WORK_DIR=DIR -P tests/layering_test.cmake")
endif()

set(failures "")

# check(NAME EXPECT pass|fail [MATCH regex...] FILES path content path content ...)
function(check name)
  cmake_parse_arguments(C "" "EXPECT" "MATCH;FILES" ${ARGN})
  set(tree ${SB_WORK_DIR}/${name})
  file(REMOVE_RECURSE ${tree})
  file(MAKE_DIRECTORY ${tree})
  set(files ${C_FILES})
  while(files)
    list(POP_FRONT files path content)
    file(WRITE ${tree}/${path} "${content}\n")
  endwhile()
  execute_process(COMMAND ${CMAKE_COMMAND} -DSB_SOURCE_DIR=${tree} -P ${SB_SOURCE_DIR}/cmake/layering.cmake
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(problem "")
  if(C_EXPECT STREQUAL "fail" AND rc EQUAL 0)
    set(problem "the check passed; it should fail")
  elseif(C_EXPECT STREQUAL "pass" AND NOT rc EQUAL 0)
    set(problem "the check failed; it should pass:\n${err}")
  endif()
  foreach(re ${C_MATCH})
    if(NOT err MATCHES "${re}")
      string(APPEND problem "\n    its message does not match '${re}':\n${err}")
    endif()
  endforeach()
  if(problem)
    set(failures "${failures}\n  ${name}: ${problem}" PARENT_SCOPE)
  else()
    message(STATUS "ok: ${name}")
  endif()
endfunction()

set(kernels_h "#pragma once")
check(model_includes_runtime_cpu EXPECT fail
  MATCH "model/transformer.cpp" "runtime/cpu/simd.h" "runtime/cpu/ is private to 'runtime'"
  FILES runtime/kernels.h "${kernels_h}"
        runtime/cpu/simd.h "#pragma once"
        model/transformer.cpp "#include \"runtime/kernels.h\"\n#include \"runtime/cpu/simd.h\"")
check(engine_includes_runtime_cpu EXPECT fail
  MATCH "engine/engine.cpp" "runtime/cpu/ is private"
  FILES runtime/cpu/backend.h "#pragma once"
        engine/engine.cpp "  #  include \"runtime/cpu/backend.h\"")
check(model_includes_server EXPECT fail
  MATCH "model/model.h" "'model' may include only"
  FILES server/http.h "#pragma once"
        model/model.h "#include \"server/http.h\"")
check(allowed_includes EXPECT pass
  FILES runtime/kernels.h "${kernels_h}"
        runtime/cpu/backend.h "#include \"runtime/kernels.h\""
        runtime/cpu/simd.h "#pragma once"
        runtime/sampling.cpp "#include \"runtime/cpu/simd.h\""
        model/transformer.cpp "#include \"runtime/kernels.h\""
        server/backend/engine_backend.cpp "#include \"model/model.h\"\n#include \"runtime/cpu/backend.h\""
        cli/cmd_run.cpp "#include \"runtime/cpu/backend.h\""
        tests/kernels_test.cpp "#include \"runtime/cpu/simd.h\""
        bench/gemm_bench.cpp "#include \"runtime/cpu/backend.h\"")
# server/'s sub-folders (sb_layers): a back arrow, an arrow to the part's
# top, and a sub-folder not in the order each fail; arrows down pass.
check(server_backend_includes_protocols EXPECT fail
  MATCH "server/backend/engine_backend.cpp" "server/backend/ may include only server/'s transport, backend"
  FILES server/protocols/request_parse.h "#pragma once"
        server/backend/engine_backend.cpp "#include \"server/protocols/request_parse.h\"")
check(server_protocols_includes_operator EXPECT fail
  MATCH "server/protocols/anthropic/messages_parse.cpp" "server/protocols/ may include only"
  FILES server/operator/metrics.h "#pragma once"
        server/protocols/anthropic/messages_parse.cpp "#include \"server/operator/metrics.h\"")
check(server_operator_includes_top EXPECT fail
  MATCH "server/operator/activity.cpp" "server/operator/ may include only"
  FILES server/server.h "#pragma once"
        server/operator/activity.cpp "#include \"server/server.h\"")
check(server_unlisted_folder EXPECT fail
  MATCH "server/misc/: a sub-folder with C[+][+] files that is not in sb_layers"
  FILES server/misc/util.h "#pragma once")
check(server_allowed_includes EXPECT pass
  FILES server/transport/connections.h "#pragma once"
        server/backend/backend.h "#pragma once"
        server/protocols/renderer.h "#include \"server/backend/backend.h\"\n#include \"server/transport/connections.h\""
        server/operator/activity.cpp "#include \"server/protocols/renderer.h\""
        server/server.cpp "#include \"server/operator/activity.h\"\n#include \"server/backend/backend.h\"")

# The real tree passes (what every build checks too).
execute_process(COMMAND ${CMAKE_COMMAND} -DSB_SOURCE_DIR=${SB_SOURCE_DIR} -P ${SB_SOURCE_DIR}/cmake/layering.cmake
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  string(APPEND failures "\n  the source tree: ${err}")
endif()

if(failures)
  message(FATAL_ERROR "layering check:${failures}")
endif()
