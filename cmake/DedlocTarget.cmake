# Per-target build hygiene: warnings, sanitizers and ccache are applied to our own targets only,
# never as global flags (third-party headers stay out of the warning set via SYSTEM includes).

find_program(DEDLOC_CCACHE ccache)
if(DEDLOC_CCACHE)
  # The sloppiness lets ccache cache translation units that use the torch precompiled header.
  set(_dedloc_launcher ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
                       ${DEDLOC_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${_dedloc_launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_dedloc_launcher})
endif()

if(DEDLOC_SANITIZE STREQUAL "address")
  set(_dedloc_san_flags -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
elseif(DEDLOC_SANITIZE STREQUAL "thread")
  set(_dedloc_san_flags -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT DEDLOC_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DEDLOC_SANITIZE must be '', 'address' or 'thread' (got '${DEDLOC_SANITIZE}')")
endif()

# dedloc_configure_target(<target>): warnings + sanitizers for one of our targets.
function(dedloc_configure_target target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wconversion -Wno-sign-conversion -Wno-missing-field-initializers -Werror=return-type)
  if(DEDLOC_FUZZ)
    # Coverage instrumentation in every library the fuzz targets reach (libFuzzer's main links separately).
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(_dedloc_san_flags)
    target_compile_options(${target} PRIVATE ${_dedloc_san_flags})
    target_link_options(${target} PRIVATE ${_dedloc_san_flags})
  endif()
endfunction()

# dedloc_library(<name> SOURCES ... DEPS ...): a static library of one lib/dedloc/<module>.
function(dedloc_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/lib)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  dedloc_configure_target(${name})
endfunction()

# dedloc_executable(<name> SOURCES ... DEPS ...)
function(dedloc_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  dedloc_configure_target(${name})
endfunction()

# dedloc_torch_library(<name> SOURCES ... DEPS ...): a library that includes torch headers (lib/dedloc/train).
# torch/torch.h costs ~20 s per translation unit; all torch libraries share one precompiled header, built
# once for dedloc_task (the first of them).
function(dedloc_torch_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  dedloc_library(${name} SOURCES ${ARG_SOURCES} DEPS ${ARG_DEPS} ${TORCH_LIBRARIES})
  if(name STREQUAL "dedloc_task")
    target_precompile_headers(${name} PRIVATE <torch/torch.h>)
  else()
    target_precompile_headers(${name} REUSE_FROM dedloc_task)
  endif()
endfunction()
