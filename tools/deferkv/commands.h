#pragma once
// Each subcommand of the `deferkv` CLI lives in its own file and adds itself here.
#include <CLI/CLI.hpp>

namespace deferkv::cli {

// Thrown by a command that ends with an exit status other than 0 or 1 without an error
// message (eval interrupted by Ctrl-C: 130, as a shell reports SIGINT).
struct ExitCode {
  int status;
};

void add_generate_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_bench_batch_command(CLI::App& app);
void add_make_model_command(CLI::App& app);
void add_make_data_command(CLI::App& app);
void add_import_weights_command(CLI::App& app);
void add_make_lookahead_weights_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_presses_command(CLI::App& app);
void add_press_bench_command(CLI::App& app);
void add_analyze_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_score_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_bench_serve_command(CLI::App& app);

}  // namespace deferkv::cli
