# Sanitizer builds (scripts/sanitize.sh). DEFERKV_SANITIZE is a -fsanitize= list, e.g.
# "address,undefined" or "thread": every target is compiled and linked with it, and the
# first report ends the program with an error (-fno-sanitize-recover), so a test or a
# fuzz run that triggers one fails.
set(DEFERKV_SANITIZE "" CACHE STRING "Sanitizers for every target (-fsanitize=LIST), e.g. address,undefined")
if(DEFERKV_SANITIZE)
  add_compile_options(-fsanitize=${DEFERKV_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${DEFERKV_SANITIZE})
endif()

# ThreadSanitizer's test programs (scripts/sanitize.sh runs them with the server's tests): the
# thread pool on its own, and the batch engine's tests, each in a small program of its own so
# that the TSan build compiles only what they need (deferkv_tests holds every test).
if(DEFERKV_SANITIZE MATCHES "thread" AND DEFERKV_BUILD_TESTS)
  find_package(GTest REQUIRED)
  add_executable(deferkv_thread_pool_tests ${CMAKE_SOURCE_DIR}/src/base/thread_pool.cpp
                                           ${CMAKE_SOURCE_DIR}/tests/base/thread_pool_test.cpp)
  target_include_directories(deferkv_thread_pool_tests PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(deferkv_thread_pool_tests PRIVATE fmt::fmt Threads::Threads GTest::gtest GTest::gtest_main)
endif()
