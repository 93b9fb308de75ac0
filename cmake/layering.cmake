# The layering of statebank's parts, checked on every configure and every
# build: a source or header of a part may include (`#include "part/..."`)
# only its own part and the parts below it. A forbidden include fails with
# the file, the line and the rule it breaks.
#
# The table. sb_part(NAME USES PART...) declares a part (a top-level folder)
# and the parts it includes directly; what those may include it may include
# too (the arrows are transitive), and every part may include `common`.
# sb_part(NAME ANY) declares a part that may include anything (tests,
# fuzzers). A new part is one more line here; a top-level folder with
# C++ files that is not in the table fails the check, so none slips past it.
#
# A folder inside a part may be private to it: sb_private(FOLDER USED_BY
# PART...) lets only FOLDER's own part, the parts listed and the ANY parts
# include from it. runtime/cpu/ (the CPU kernels) is one: the model reaches
# kernels through runtime/kernels.h and a factory handed to Model::load, so
# only what chooses the backend (server, cli, the benchmarks) names it.
#
# A part's sub-folders may be ordered the same way: sb_layers(PART SUB...)
# lists them from the bottom up. A file in one (at any depth) may include
# only its own sub-folder and those listed before it, never PART's top-level
# files: those are the part's top, which wires the sub-folders together. A
# sub-folder holding C++ that is not listed fails the check. server/ is one
# (server/README.md, "Layout", argues its order).
#
# Run as a script (cmake -DSB_SOURCE_DIR=DIR -P cmake/layering.cmake) it
# checks DIR; included from CMakeLists.txt it defines sb_check_layering().

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)  # policies (IN_LIST) for script mode
endif()

macro(sb_part name)
  cmake_parse_arguments(_SBP "ANY" "" "USES" ${ARGN})
  list(APPEND SB_PARTS ${name})
  set(SB_PART_${name}_ANY ${_SBP_ANY})
  set(SB_PART_${name}_USES ${_SBP_USES})
endmacro()

set(SB_PARTS "")
sb_part(common)
sb_part(runtime   USES common)
sb_part(fs        USES common)
sb_part(jinja     USES common)           # the Jinja2 interpreter chat templates run in
sb_part(constrain USES common)           # grammars and token masks for structured outputs
sb_part(tokenizer USES jinja)
sb_part(gguf      USES runtime fs)        # the GGUF file format
sb_part(model     USES gguf)
sb_part(bank      USES runtime fs)        # runtime: the state schema
sb_part(engine    USES bank model)
sb_part(server    USES engine tokenizer constrain)
sb_part(bench     USES server)          # the benchmark workloads, `statebank bench`'s commands, the *_bench programs
sb_part(cli       USES server bench)      # bench: `statebank bench agent|load` run its workloads
sb_part(tests     ANY)
sb_part(fuzz      ANY)

macro(sb_private folder)
  cmake_parse_arguments(_SBV "" "" "USED_BY" ${ARGN})
  list(APPEND SB_PRIVATE ${folder})
  set(SB_PRIVATE_${folder}_USED_BY ${_SBV_USED_BY})
endmacro()

set(SB_PRIVATE "")
sb_private(runtime/cpu USED_BY server cli bench)  # the CPU backend: chosen by what starts a model

macro(sb_layers part)
  list(APPEND SB_LAYERED ${part})
  set(SB_LAYERS_${part} ${ARGN})
endmacro()

set(SB_LAYERED "")
# The HTTP server: bytes and connections; the model, bank and engine behind
# the serving and admin interfaces; the three APIs' parsing and rendering;
# the operator's metrics, activity and page. Above them, server/*.{h,cpp}.
sb_layers(server transport backend protocols operator)

# Folders at the top level that hold no part (no C++ of the product).
set(SB_NOT_PARTS build cmake docs tools .git .ci)

# ${out} = the folders directly in `dir` that hold C++ files (at any depth)
# and are not in `listed`.
function(sb_unlisted_folders dir listed out)
  set(found "")
  file(GLOB subs LIST_DIRECTORIES true RELATIVE ${dir} ${dir}/*)
  foreach(sub ${subs})
    if(IS_DIRECTORY ${dir}/${sub} AND NOT sub IN_LIST listed)
      file(GLOB_RECURSE cxx ${dir}/${sub}/*.h ${dir}/${sub}/*.cpp)
      if(cxx)
        list(APPEND found ${sub})
      endif()
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# ${out} = every part `part` may include, itself and common included.
function(sb_part_closure part out)
  set(seen ${part} common)
  set(todo ${SB_PART_${part}_USES})
  while(todo)
    list(POP_FRONT todo p)
    if(NOT p IN_LIST seen)
      list(APPEND seen ${p})
      list(APPEND todo ${SB_PART_${p}_USES})
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

function(sb_check_layering source_dir)
  set(errors "")
  # Table sanity: every arrow names a declared part.
  foreach(part ${SB_PARTS})
    foreach(used ${SB_PART_${part}_USES})
      if(NOT used IN_LIST SB_PARTS)
        string(APPEND errors "\n  cmake/layering.cmake: part '${part}' uses '${used}', which is not declared")
      endif()
    endforeach()
  endforeach()
  # Every top-level folder holding C++ is a declared part.
  sb_unlisted_folders(${source_dir} "${SB_PARTS};${SB_NOT_PARTS}" unlisted)
  foreach(top ${unlisted})
    string(APPEND errors "\n  ${top}/: a folder with C++ files that is not a part: declare it in cmake/layering.cmake")
  endforeach()
  foreach(folder ${SB_PRIVATE})
    string(REGEX MATCH "^[^/]+" owner "${folder}")
    if(NOT owner IN_LIST SB_PARTS)
      string(APPEND errors "\n  cmake/layering.cmake: private folder '${folder}' is not inside a declared part")
    endif()
  endforeach()
  foreach(part ${SB_PARTS})
    if(SB_PART_${part}_ANY OR NOT IS_DIRECTORY ${source_dir}/${part})
      continue()
    endif()
    sb_part_closure(${part} allowed)
    file(GLOB_RECURSE files ${source_dir}/${part}/*.h ${source_dir}/${part}/*.cpp)
    foreach(f ${files})
      file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"[A-Za-z0-9_]+/")
      foreach(line ${lines})
        string(REGEX MATCH "\"([A-Za-z0-9_]+)/" _ "${line}")
        set(target ${CMAKE_MATCH_1})
        if((target IN_LIST SB_PARTS OR target IN_LIST SB_NOT_PARTS) AND NOT target IN_LIST allowed)
          file(RELATIVE_PATH rel ${source_dir} ${f})
          string(STRIP "${line}" line)
          list(JOIN allowed ", " allowed_text)
          string(APPEND errors "\n  ${rel}: ${line}: '${part}' may include only ${allowed_text}")
        endif()
        string(REGEX MATCH "\"([^\"]+)\"" _ "${line}")
        set(path ${CMAKE_MATCH_1})
        foreach(folder ${SB_PRIVATE})
          string(REGEX MATCH "^[^/]+" owner "${folder}")
          string(FIND "${path}" "${folder}/" at)
          if(at EQUAL 0 AND NOT part STREQUAL owner AND NOT part IN_LIST SB_PRIVATE_${folder}_USED_BY)
            file(RELATIVE_PATH rel ${source_dir} ${f})
            string(STRIP "${line}" line)
            list(JOIN SB_PRIVATE_${folder}_USED_BY ", " users_text)
            string(APPEND errors "\n  ${rel}: ${line}: ${folder}/ is private to '${owner}' (and ${users_text})")
          endif()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
  foreach(part ${SB_LAYERED})
    sb_check_layers(${source_dir} ${part} layer_errors)
    string(APPEND errors "${layer_errors}")
  endforeach()
  if(errors)
    message(FATAL_ERROR "layering: forbidden include arrows (rules: cmake/layering.cmake):${errors}")
  endif()
endfunction()

# ${out} = the errors of `part`'s sub-folder order (sb_layers).
function(sb_check_layers source_dir part out)
  set(errors "")
  set(layers ${SB_LAYERS_${part}})
  sb_unlisted_folders(${source_dir}/${part} "${layers}" unlisted)
  foreach(sub ${unlisted})
    string(APPEND errors "\n  ${part}/${sub}/: a sub-folder with C++ files that is not in sb_layers(${part} ...)")
  endforeach()
  foreach(sub ${layers})
    list(FIND layers ${sub} own)
    math(EXPR below "${own} + 1")
    list(SUBLIST layers 0 ${below} allowed)
    list(JOIN allowed ", " allowed_text)
    file(GLOB_RECURSE files ${source_dir}/${part}/${sub}/*.h ${source_dir}/${part}/${sub}/*.cpp)
    foreach(f ${files})
      file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"${part}/")
      foreach(line ${lines})
        string(REGEX MATCH "\"${part}/([^\"]+)\"" _ "${line}")
        string(REGEX MATCH "^[^/]+/" target "${CMAKE_MATCH_1}")
        string(REGEX REPLACE "/$" "" target "${target}")
        if(NOT target IN_LIST allowed)
          file(RELATIVE_PATH rel ${source_dir} ${f})
          string(STRIP "${line}" line)
          string(APPEND errors "\n  ${rel}: ${line}: ${part}/${sub}/ may include only ${part}/'s ${allowed_text}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  set(${out} "${errors}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT SB_SOURCE_DIR)
    message(FATAL_ERROR "usage: cmake -DSB_SOURCE_DIR=DIR -P cmake/layering.cmake")
  endif()
  sb_check_layering(${SB_SOURCE_DIR})
endif()
