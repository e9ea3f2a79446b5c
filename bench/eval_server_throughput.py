#!/usr/bin/env python3
"""Issue 24's client benchmark: `deferkv eval --server` with K requests in flight against
`deferkv serve -np K`, beside the server's own throughput on the same requests sent by K
plain HTTP clients (threads with urllib; deferkv has no load generator of its own).

The requests are eval's very own: a first eval run against a recording stub (this script)
captures their bodies, which the K clients then replay. Alternates the two sides REPEATS times
and prints each wall time and the ratio (client side / plain clients, in requests per second).

    bench/eval_server_throughput.py [path/to/deferkv]     (K=2, -t 2 by default: K=… T=… REPEATS=…)
"""
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFERKV = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "deferkv"))
K = int(os.environ.get("K", "2"))
THREADS = int(os.environ.get("T", "2"))
REPEATS = int(os.environ.get("REPEATS", "3"))
MODEL = os.path.join(ROOT, "models", "deferkv-retrieval-5m.gguf")
SWEEP = ["--tasks", "niah_single_1,niah_multikey_1", "--lengths", "1k", "--samples", "6",
         "--press", "full;snapkv", "--kv-budget", "64"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record_requests():
    """Runs the sweep against a stub that records each completion request's body."""
    bodies = []

    class Stub(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, value):
            data = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.reply({"object": "list", "data": [{"id": "deferkv-retrieval-5m.gguf", "owned_by": "deferkv"}]})

        def do_POST(self):
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.reply({"choices": [{"text": "", "finish_reason": "stop"}]})

    stub = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([DEFERKV, "eval", "-m", MODEL, *SWEEP, "--server", f"http://127.0.0.1:{stub.server_port}",
                        "-o", out], check=True, capture_output=True)
    stub.shutdown()
    return bodies


def replay(url, bodies):
    """The bodies POSTed by K threads, each taking the next; returns the wall seconds."""
    queue = list(reversed(bodies))
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            request = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                             {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=600) as answer:
                json.load(answer)

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(K)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def eval_on_server(url):
    """eval --server --concurrency K into a fresh folder: (the command's wall s, the sweep's s)."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        run = subprocess.run([DEFERKV, "eval", "-m", MODEL, *SWEEP, "--server", url, "--concurrency", str(K),
                              "-o", out], check=True, capture_output=True, text=True)
        wall = time.perf_counter() - start
    sweep = float(re.search(r"samples run in ([0-9.]+) s", run.stderr).group(1))
    return wall, sweep


def main():
    bodies = record_requests()
    port = free_port()
    server = subprocess.Popen([DEFERKV, "serve", "-m", MODEL, "--port", str(port), "-np", str(K), "-t", str(THREADS),
                               "--kv-memory", "1GiB"], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        replay(url, bodies[:K])  # warm-up
        print(f"{len(bodies)} requests, K={K}, server -t {THREADS}")
        for r in range(1, REPEATS + 1):
            wall, sweep = eval_on_server(url)
            plain = replay(url, bodies)
            print(f"repeat {r}: eval --server {wall:.2f} s (its sweep {sweep:.2f} s), {K} plain clients {plain:.2f} s; "
                  f"throughput ratio {plain / wall:.2f} (sweep only {plain / sweep:.2f})")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
