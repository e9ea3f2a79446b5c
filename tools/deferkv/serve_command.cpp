// `deferkv serve`: the OpenAI-compatible HTTP server (src/server), until SIGINT/SIGTERM.
#include <semaphore.h>

#include <cerrno>
#include <csignal>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "common_options.h"
#include "deferkv/chat_template.h"
#include "deferkv/error.h"
#include "deferkv/generation_params.h"
#include "server/byte_size.h"
#include "server/http_server.h"

namespace deferkv::cli {
namespace {

// SIGINT or SIGTERM, whichever thread the kernel delivers it to (OpenBLAS starts its threads
// before main, with no signal blocked, so a signal mask cannot keep it on this thread): the
// handler records it and posts the semaphore the main thread waits on (both are
// async-signal-safe).
sem_t g_stop_requested;
volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) {
  g_stop_signal = signal;
  sem_post(&g_stop_requested);
}

void handle_stop_signals() {
  sem_init(&g_stop_requested, 0, 0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;  // the server's threads' system calls go on
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

struct ServeArgs {
  server::ServerOptions server;
  std::string kv_memory = "2GiB";
  PressOptions press;
};

void run_serve(ServeArgs& args) {
  args.server.kv_memory_bytes = server::parse_byte_size(args.kv_memory);
  if (args.server.defaults.max_tokens != -1) check_max_tokens(args.server.defaults.max_tokens, "--n-predict");
  make_press_from(args.press);  // refuses a bad --press / budget before anything starts
  args.server.defaults.press = args.press.spec;
  args.server.defaults.kv_budget = args.press.budget == PressOptions::kNoBudget ? 0 : args.press.budget;
  args.server.defaults.kv_ratio = args.press.ratio;

  handle_stop_signals();
  server::HttpServer http(args.server);
  http.listen();
  // Said before the load, so that a client (or a test) knows the port while /health is 503.
  fmt::print(stderr, "deferkv serve: listening on http://{}:{}, loading {}\n", args.server.host, http.port(),
             args.server.model_path);
  std::fflush(stderr);
  // A model that cannot be loaded: the error propagates (main prints it and exits 1); the
  // server's destructor stops the listener first, whatever clients are doing.
  http.load_model();
  fmt::print(stderr, "deferkv serve: ready ({} slots, KV memory {} bytes)\n", args.server.n_slots,
             args.server.kv_memory_bytes);
  std::fflush(stderr);
  while (sem_wait(&g_stop_requested) != 0 && errno == EINTR) {
  }
  fmt::print(stderr, "deferkv serve: {}, shutting down\n", g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
  http.stop();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  add_model_option(*cmd, args->server.model_path);
  cmd->add_option("--host", args->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->server.port, "Port to listen on (0: any free port)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--parallel", args->server.n_slots, "Requests generating at once (slots; also -np)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--max-queue", args->server.max_queue,
                  fmt::format("Requests waiting for a slot at most; more are refused with 429 (0: {} per slot, at least {})",
                              server::kDefaultQueuePerSlot, server::kMinDefaultQueue))
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--kv-memory", args->kv_memory,
                  "KV-cache memory shared by all requests (bytes, or with KiB/MiB/GiB); requests wait for room")
      ->capture_default_str();
  add_threads_option(*cmd, args->server.threads);
  cmd->add_option("--context-dir", args->server.context_dir,
                  "Write compressed contexts (POST /v1/contexts) here; idle ones dropped for memory are spilled "
                  "and loaded back on demand, and a restarted server finds them (docs/serving.md)");
  cmd->add_flag("--context-reuse", args->server.context_reuse,
               "A prompt that begins with a kept compressed context's tokens, under the same press, starts from "
               "the longest such context instead of prefilling them (docs/serving.md)");
  cmd->add_option("-c,--ctx-size", args->server.n_ctx, "Context size in tokens (default: model's, at most 4096)");
  cmd->add_option("-n,--n-predict", args->server.defaults.max_tokens,
                  "Default max_tokens of a request (-1: up to the context's end)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 20));
  cmd->add_option("--chat-template", args->server.chat_template,
                  "Chat format instead of the model's: " + fmt::format("{}", fmt::join(ChatTemplate::known_names(), ", ")));
  add_press_options(*cmd, args->press);
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace deferkv::cli
