// deferkv: long-context LLM inference with KV-cache compression.
#include <cstdio>
#include <cstring>
#include <new>
#include <exception>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "common_options.h"
#include "deferkv/error.h"
#include "kernels/gemm_int16.h"
#include "kernels/matvec.h"
#include "kernels/row_groups.h"
#include "kernels/simd_target.h"
#include "model/model_weights.h"

int main(int argc, char** argv) {
  CLI::App app{"deferkv: long-context LLM inference with KV-cache compression"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  // -v is taken before or after the subcommand's name: subcommands hand options they do not
  // know to the top level.
  app.fallthrough();
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Log details to stderr");
  app.set_version_flag("--version", "deferkv " DEFERKV_VERSION " (git " DEFERKV_GIT_COMMIT ")");
  deferkv::cli::add_generate_command(app);
  deferkv::cli::add_inspect_command(app);
  deferkv::cli::add_bench_command(app);
  deferkv::cli::add_bench_batch_command(app);
  deferkv::cli::add_make_model_command(app);
  deferkv::cli::add_make_data_command(app);
  deferkv::cli::add_import_weights_command(app);
  deferkv::cli::add_make_lookahead_weights_command(app);
  deferkv::cli::add_tokenize_command(app);
  deferkv::cli::add_presses_command(app);
  deferkv::cli::add_press_bench_command(app);
  deferkv::cli::add_analyze_command(app);
  deferkv::cli::add_calibrate_command(app);
  deferkv::cli::add_score_command(app);
  deferkv::cli::add_eval_command(app);
  deferkv::cli::add_serve_command(app);
  deferkv::cli::add_bench_serve_command(app);
  app.parse_complete_callback([&] {
    spdlog::set_default_logger(spdlog::stderr_color_mt("deferkv"));
    spdlog::set_pattern("[%l] %v");
    spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
  });
  // llama.cpp's multi-letter short flags, which CLI11 cannot name, under their long names.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-np") == 0) argv[i] = const_cast<char*>("--parallel");
  }
  try {
    // DEFERKV_MAX_SIMD=avx2 runs the kernels a CPU without AVX-512 gets (kernels/simd_target.h).
    deferkv::cap_simd_target_from_environment();
    // DEFERKV_KQUANT_ACTIVATION=int16|int8 (kernels/matvec.h): a bad value fails here, not mid-run.
    deferkv::kquant_activation();
    // DEFERKV_BF16_ACTIVATION=bf16|f32 (kernels/gemm_int16.h), likewise.
    deferkv::bf16_activation();
    // DEFERKV_WEIGHT_LAYOUT=gguf|row-groups (kernels/row_groups.h), likewise.
    deferkv::weight_layout();
    // DEFERKV_WEIGHT_MEMORY=map|huge-pages (model/model_weights.h), likewise.
    deferkv::weight_memory();
    std::vector<std::string> args = deferkv::cli::with_long_flag_names(argc, argv);
    std::vector<char*> pointers;
    for (std::string& a : args) pointers.push_back(a.data());
    app.parse(static_cast<int>(pointers.size()), pointers.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 1, as every other error does
    // (CLI11's own codes, 105-115, would read as a crash to scripts that test for 1).
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const deferkv::cli::ExitCode& e) {
    return e.status;
  } catch (const deferkv::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // The library names what it was allocating where it can (base/allocation_error.h);
    // this is the last line, so that a user never reads "std::bad_alloc".
    std::fflush(stdout);
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
