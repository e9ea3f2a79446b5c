# The kernels' tests (tests/kernels): a program of their own that links only the layers up to
# the kernels, so that it also builds alone for another instruction set architecture
# (DEFERKV_KERNELS_ONLY: scripts/test_aarch64.sh runs it under qemu-user) and runs once more
# with dispatch capped at AVX2 (scripts/test.sh; DEFERKV_MAX_SIMD, tests/support/simd_cap.cpp).
file(GLOB DEFERKV_KERNEL_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/kernels/*.cpp)
add_executable(deferkv_kernel_tests ${DEFERKV_KERNEL_TEST_SOURCES} ${CMAKE_SOURCE_DIR}/tests/support/simd_cap.cpp)
target_include_directories(deferkv_kernel_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(deferkv_kernel_tests PRIVATE deferkv_kernels GTest::gtest GTest::gtest_main)
# As deferkv_tests: the tests' own code at -O1, their time being spent in the kernels.
target_compile_options(deferkv_kernel_tests PRIVATE $<$<CONFIG:Release>:-O1>)
if(NOT CMAKE_CROSSCOMPILING)
  include(GoogleTest)
  gtest_discover_tests(deferkv_kernel_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300 ${DEFERKV_TEST_PROPERTIES})
endif()
