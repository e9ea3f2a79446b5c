# libFuzzer targets (fuzz/README.md): one executable fuzz_<target> per fuzz/fuzz_<target>.cpp,
# linked with the library. Needs clang; use it with DEFERKV_SANITIZE=address,undefined
# (scripts/fuzz.sh does) so that memory errors and undefined behaviour are findings too.
option(DEFERKV_FUZZ "Build the libFuzzer targets of fuzz/ (clang only)" OFF)
if(DEFERKV_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DEFERKV_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++-16")
  endif()
  # The library carries the coverage that guides the fuzzer; -no-link leaves main() to
  # the tests, so the same build runs the test suite too. Not the SIMD kernels: no parser
  # lives there, and coverage on their unrolled loops only slows their compile and the
  # test suite that this build also runs.
  foreach(layer ${DEFERKV_LAYER_TARGETS})
    if(NOT layer STREQUAL "deferkv_kernels")
      target_compile_options(${layer} PRIVATE -fsanitize=fuzzer-no-link)
    endif()
  endforeach()
  file(GLOB DEFERKV_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_*.cpp)
  foreach(source ${DEFERKV_FUZZ_SOURCES})
    get_filename_component(name ${source} NAME_WE)
    add_executable(${name} ${source})
    target_link_libraries(${name} PRIVATE deferkv)
    if(name MATCHES "^fuzz_server")
      target_link_libraries(${name} PRIVATE deferkv_server)  # not part of the library target
    endif()
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  endforeach()
endif()
