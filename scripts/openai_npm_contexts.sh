#!/usr/bin/env bash
# Runs scripts/openai_npm_contexts.cjs (OpenAI's npm client with kv_context) against a
# `deferkv serve` started here on 127.0.0.1, bounded (90 s) and always stopped.
#   scripts/openai_npm_contexts.sh DEFERKV_BINARY MODEL.gguf NODE_MODULES_DIR
# NODE_MODULES_DIR holds `npm install openai`. ctest runs it as openai_npm_contexts when
# CMake is configured with -DDEFERKV_OPENAI_NODE_MODULES=DIR.
set -euo pipefail
deferkv=$1 model=$2 modules=$3
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
timeout 90 "$deferkv" serve -m "$model" --port 0 -t 1 --host 127.0.0.1 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
port=
for _ in $(seq 150); do
  port=$(grep -o '127\.0\.0\.1:[0-9]*' "$log" | head -1 | cut -d: -f2 || true)
  if [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
  port=
  sleep 0.2
done
if [ -z "$port" ]; then
  echo "the server did not become ready:" >&2
  cat "$log" >&2
  exit 1
fi
NODE_PATH="$modules" timeout 60 node "$here/openai_npm_contexts.cjs" "$port"
