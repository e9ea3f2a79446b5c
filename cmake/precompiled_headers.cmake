# Precompiled headers (DEFERKV_PCH; CI turns it on in .ci/run). Parsing GoogleTest's and
# nlohmann-json's headers costs about 2.5 s each per source file at -O0 (clang 16), more than
# compiling most test files themselves; a clean build of the suite parses them once per target
# instead. Off for development: a header that a file forgets to include would still compile
# there (it arrives through the precompiled one), and ccache cannot reuse objects built
# against a precompiled header without loosening its checks.
option(DEFERKV_PCH "Precompile the external headers of the tests, the eval layer and the CLI" OFF)

if(DEFERKV_PCH)
  # Only third-party and standard headers: the project's own headers change too often for a
  # precompiled copy to pay, and the layering probes must see each layer's includes as written.
  set(DEFERKV_PCH_STD <algorithm> <cmath> <filesystem> <fstream> <functional> <map> <random>
                      <sstream> <string> <vector>)
  set(DEFERKV_PCH_TEST_HEADERS <gtest/gtest.h> <nlohmann/json.hpp> <fmt/format.h> ${DEFERKV_PCH_STD})
  foreach(target deferkv_tests deferkv_kernel_tests deferkv_server_tests)
    if(TARGET ${target})
      target_precompile_headers(${target} PRIVATE ${DEFERKV_PCH_TEST_HEADERS})
    endif()
  endforeach()
  target_precompile_headers(deferkv_eval PRIVATE <nlohmann/json.hpp> <fmt/format.h> ${DEFERKV_PCH_STD})
  target_precompile_headers(deferkv_cli PRIVATE <CLI/CLI.hpp> <nlohmann/json.hpp> <fmt/format.h>
                            ${DEFERKV_PCH_STD})
endif()
