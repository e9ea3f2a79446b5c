# The library, one static target per layer of docs/layout.md:
#
#   eval, server → engine → model, press → tokenizer, observe → kv → kernels → tensor → base
#
# A layer compiles against its own headers and those of the layers below it, and nothing
# else, so an include that runs upward fails to compile. Sources include headers by their
# folder ("kv/kv_cache.h", "deferkv/session.h"); each layer gets an include root of its own
# under build/layers/<layer>/ that holds links to just its folders and its public headers,
# and a layer sees the roots of the layers it links (PUBLIC, so transitively).
#
# deferkv_layer(<layer> DIRS <folders of src/> [PUBLIC_HEADERS <headers of include/deferkv/>]
#               [DEPENDS <layers below>] [LIBRARIES <packages>])
# defines the target deferkv_<layer> and appends it to DEFERKV_LAYER_TARGETS.
set(DEFERKV_LAYER_TARGETS "")
function(deferkv_layer layer)
  cmake_parse_arguments(ARG "" "" "DIRS;PUBLIC_HEADERS;DEPENDS;LIBRARIES" ${ARGN})
  set(root ${CMAKE_BINARY_DIR}/layers/${layer})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/deferkv)
  set(sources "")
  foreach(dir ${ARG_DIRS})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${dir} ${root}/${dir} SYMBOLIC)
    file(GLOB_RECURSE dir_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${dir}/*.cpp)
    list(APPEND sources ${dir_sources})
  endforeach()
  foreach(header ${ARG_PUBLIC_HEADERS})
    if(NOT EXISTS ${CMAKE_SOURCE_DIR}/include/deferkv/${header})
      message(FATAL_ERROR "layer ${layer}: no public header include/deferkv/${header}")
    endif()
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/include/deferkv/${header} ${root}/deferkv/${header} SYMBOLIC)
  endforeach()
  set(target deferkv_${layer})
  add_library(${target} STATIC ${sources})
  target_include_directories(${target} PUBLIC ${root})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  list(TRANSFORM ARG_DEPENDS PREPEND deferkv_)
  target_link_libraries(${target} PUBLIC ${ARG_DEPENDS} ${ARG_LIBRARIES})
  if(DEFERKV_BUILD_PYTHON)
    # The Python extension links the library into a shared object. No semantic
    # interposition keeps -fPIC from blocking inlining, so the CLI runs as fast as before.
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_compile_options(${target} PRIVATE -fno-semantic-interposition)
  endif()
  set(DEFERKV_LAYER_TARGETS ${DEFERKV_LAYER_TARGETS} ${target} PARENT_SCOPE)
endfunction()

deferkv_layer(base DIRS base PUBLIC_HEADERS error.h
              LIBRARIES fmt::fmt spdlog::spdlog Threads::Threads OpenSSL::Crypto)
# Where the embedded models and data are found in a build tree (resource_dir.cpp), and tests' data.
target_compile_definitions(deferkv_base PUBLIC DEFERKV_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
deferkv_layer(tensor DIRS tensor DEPENDS base LIBRARIES nlohmann_json::nlohmann_json)
deferkv_layer(kernels DIRS kernels DEPENDS tensor LIBRARIES PkgConfig::HWY PkgConfig::OPENBLAS)
# [OUR FORMULATION] The SIMD kernels get AddressSanitizer but not UndefinedBehaviorSanitizer
# in a sanitizer build: UBSan's checks on Highway's inlined intrinsics multiply their compile
# time (63.6 CPU-s against 17.4 with ASan alone for one file), which the CI's 30 minutes cannot
# hold, while ASan still checks every load and store they make.
if(DEFERKV_SANITIZE MATCHES "undefined")
  target_compile_options(deferkv_kernels PRIVATE -fno-sanitize=undefined)
endif()
# [OUR FORMULATION] In a sanitizer build the kernels are compiled once, for this machine's own
# instruction set (Highway's static target under -march=native), not for the three targets of
# hwy_targets.h: the instruction set dynamic dispatch would pick here is the one the tests
# run either way, and the other two tripled the build. They keep -O1, as their tests run
# through them millions of times, while the rest of a sanitizer build compiles at -O0
# (scripts/sanitize.sh), which takes 2.5x less time than -O1 under ASan.
if(DEFERKV_SANITIZE)
  target_compile_options(deferkv_kernels PRIVATE -O1 -march=native)
  target_compile_definitions(deferkv_kernels PRIVATE HWY_COMPILE_ONLY_STATIC)
endif()
if(DEFERKV_KERNELS_ONLY)
  return()
endif()
deferkv_layer(kv DIRS kv DEPENDS kernels)
deferkv_layer(observe DIRS observe PUBLIC_HEADERS model_readout.h DEPENDS kv)
deferkv_layer(tokenizer DIRS tokenizer PUBLIC_HEADERS tokenizer.h chat_template.h DEPENDS tensor
              LIBRARIES PkgConfig::PCRE2 ICU::uc)
deferkv_layer(model DIRS model PUBLIC_HEADERS model.h model_config.h DEPENDS observe tokenizer)
if(DEFERKV_SANITIZE)
  target_compile_options(deferkv_tokenizer PRIVATE -O1)
  target_compile_options(deferkv_model PRIVATE -O1)
endif()
deferkv_layer(press DIRS press PUBLIC_HEADERS press.h DEPENDS observe)
deferkv_layer(engine DIRS engine PUBLIC_HEADERS session.h generate.h sampler.h embedding.h batch_engine.h generation_params.h compressed_context.h DEPENDS model press)
# The base layer's hashing (a model file's SHA-256 in every eval run's config) and the
# engine's sampler (a sort over the vocabulary per token) were a tenth of the sanitizer
# suite's slow tests at -O0; both layers are small, so -O1 costs little to compile.
if(DEFERKV_SANITIZE)
  target_compile_options(deferkv_base PRIVATE -O1)
  target_compile_options(deferkv_engine PRIVATE -O1)
endif()
deferkv_layer(eval DIRS eval
              PUBLIC_HEADERS eval_longbench.h eval_metrics.h eval_protocol.h eval_run.h eval_sweep.h eval_tasks.h score_predictions.h
              DEPENDS engine)
deferkv_layer(server DIRS server DEPENDS engine LIBRARIES PkgConfig::HTTPLIB)
# The client of OpenAI-compatible servers (eval --server): its own layer so that the library
# gets no HTTP dependency and the server no client.
deferkv_layer(client DIRS client DEPENDS base LIBRARIES nlohmann_json::nlohmann_json PkgConfig::HTTPLIB)

# Every public header belongs to one layer: a new one must be given to its layer above.
file(GLOB DEFERKV_PUBLIC_HEADERS RELATIVE ${CMAKE_SOURCE_DIR}/include/deferkv ${CMAKE_SOURCE_DIR}/include/deferkv/*.h)
foreach(header ${DEFERKV_PUBLIC_HEADERS})
  file(GLOB owners ${CMAKE_BINARY_DIR}/layers/*/deferkv/${header})
  if(NOT owners)
    message(FATAL_ERROR "include/deferkv/${header} belongs to no layer: add it to a deferkv_layer() in cmake/layers.cmake")
  endif()
endforeach()

# The whole library for its clients (the CLI, the Python module, tests, benchmarks): the
# top layers, which bring the rest.
add_library(deferkv INTERFACE)
target_link_libraries(deferkv INTERFACE deferkv_eval)
