#pragma once
// A load generator for an OpenAI-compatible server (`deferkv bench-serve`): `clients`
// threads, each sending one streamed request at a time and taking the next unsent body as
// soon as its answer has ended (a closed loop), until every body was sent once. Beside
// them one thread polls the server's /metrics, for how many requests ran at once and the
// KV bytes they held.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/openai_client.h"

namespace deferkv::client {

struct LoadOptions {
  int clients = 8;
  bool chat = false;                  // the bodies go to /v1/chat/completions
  double metrics_poll_seconds = 0.02;  // <= 0: /metrics is not read
  // Each answer must say it ran the press its body asked for (press_mismatch, deferkv
  // serve); one that does not is a failed request.
  bool check_press = false;
};

struct SentRequest {
  size_t index = 0;           // of its body
  int client = 0;             // the thread that sent it
  double sent_seconds = 0;    // since the run's start
  StreamedAnswer answer;
};

// The peaks /metrics showed while the run lasted (deferkv serve's gauge names).
struct ServerPeaks {
  bool available = false;        // the server answered /metrics with them
  int64_t polls = 0;
  int64_t max_running = 0;       // deferkv_requests_running
  int64_t max_waiting = 0;       // deferkv_requests_waiting
  int64_t max_kv_bytes_used = 0; // deferkv_kv_bytes_used: all running requests' KV together
  int64_t kv_bytes_capacity = 0; // deferkv_kv_bytes_capacity
};

struct LoadRun {
  std::vector<SentRequest> requests;  // in the order of the bodies
  double wall_seconds = 0;            // from the first send to the last answer's end
  ServerPeaks server;
};

// Sends every body once, `options.clients` at a time. Errors of single requests are in
// their answers; throws only for bad options (clients < 1).
LoadRun run_load(const OpenAiClient& client, const std::vector<nlohmann::json>& bodies, const LoadOptions& options);

}  // namespace deferkv::client
