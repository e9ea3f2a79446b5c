#!/usr/bin/env python3
"""Issue 44's serving targets: questions per second over compressed contexts (`deferkv serve`,
`POST /v1/contexts` + `kv_context`) against the same questions sent whole, to deferkv with the
full cache and to llama-server with its prompt cache (same GGUF, same threads, greedy, every
answer exactly TOKENS tokens long: `ignore_eos` on both sides).

    LLAMA_BIN=/path/to/llama.cpp/build/bin bench/contexts_vs_llamaserver.py [--json OUT]
    DOC_TOKENS=300 QUESTIONS=3 TOKENS=4 DOCS=4 MODEL=models/deferkv-retrieval-5m.gguf \\
        LLAMA_BIN=... bench/contexts_vs_llamaserver.py          (a tiny end-to-end check)

Scenario A, one document of DOC_TOKENS tokens and QUESTIONS questions about it, three sides:
  deferkv-reuse   POST /v1/contexts (PRESS@BUDGET, its creation counted), then every question
                  with `kv_context`: only the question is prefilled;
  deferkv-full    each question sent as document + question, `kv_press: "full"`: every request
                  prefills the whole document;
  llama-server    the same document + question prompts to /completion with `cache_prompt` (its
                  default): the slot keeps the last prompt, so every question after the first
                  prefills only its own tokens.
Scenario B, DOCS documents, DOC_PASSES questions each, asked round robin over the documents,
under a memory cap of CACHES full caches (one full cache: a whole request's tokens, document +
question + TOKENS, in the f16 KV of the model):
  deferkv-contexts  `serve --kv-memory CAP`; the DOCS contexts are made up front (the setup
                    phase), then the questions with `kv_context`; every context should stay
                    resident (GET /v1/contexts and /metrics are read after both phases);
  llama-server      `-c` and `--cache-ram` both the cap's bytes; the setup phase sends each
                    document once (its analogue of making the contexts), then the same
                    questions as whole prompts: a RAM cache of CACHES prompts over DOCS
                    documents asked round robin misses whenever DOCS > CACHES.
  Both throughputs are reported: the question phase alone (a server that already holds its
  documents) and setup + questions.

Every side gets a fresh server for each of its runs (started and stopped by this script on
127.0.0.1 and a free port; the start is not timed; one short warm-up request before the timed
part), and the order of the sides alternates from round to round (ROUNDS), so a drift of the
machine falls on all of them. Prints each round and the medians; --json OUT writes every raw
result (each request's seconds, usage/timings and text).

The documents are RULER's multi-key needle haystack wording ("One of the special magic numbers
for KEY is: VALUE."), keys from data/ruler/wonderwords, all drawn from SEED; the questions ask
for keys spread over the document. Every side is sent the same token ids (tokenized once by
deferkv serve's /tokenize): the document with BOS, then the question's ids as they follow the
document in the whole text, so all sides read exactly the same tokens.

Settings (environment, or the flags of the same name in lower case: --doc-tokens ...):
ROUNDS (2), DOC_TOKENS (4096), QUESTIONS (16), TOKENS (32), DOCS (32), DOC_PASSES (2), CACHES
(4), THREADS (2), CONCURRENCY (1: client threads, and -np on every server), PRESS (snapkv),
BUDGET (128), SEED (1), SCENARIOS (A,B), MODEL (build/bench-models/llama-100m-q8_0.gguf, made
with `deferkv make-model --preset 100m --type q8_0` when missing), DEFERKV_BIN (build/deferkv),
LLAMA_SERVER (or LLAMA_BIN/llama-server), READY_TIMEOUT (300 s), REQUEST_TIMEOUT (1800 s).
Python 3 standard library only.
"""
import argparse
import contextlib
import ctypes
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, "build", "bench-models", "llama-100m-q8_0.gguf")
WORDS_DIR = os.path.join(ROOT, "data", "ruler", "wonderwords")

# RULER's multi-key haystack of needles (niah_multikey_2's wording): every line is a needle,
# so any key in the document makes a question with one right answer.
HEADER = ("A special magic number is hidden within the following text. Make sure to memorize it. "
          "I will quiz you about the number afterwards.\n")
NEEDLE = "One of the special magic numbers for {key} is: {value}.\n"
QUESTION = ("What is the special magic number for {key} mentioned in the provided text? "
            "The special magic number for {key} mentioned in the provided text is")


def settings():
    """Flags whose defaults come from the environment (the names the docstring gives)."""
    env = os.environ.get
    llama_default = env("LLAMA_SERVER") or (os.path.join(env("LLAMA_BIN"), "llama-server")
                                            if env("LLAMA_BIN") else None)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", metavar="OUT", help="write every raw result here")
    p.add_argument("--deferkv", default=env("DEFERKV_BIN", os.path.join(ROOT, "build", "deferkv")))
    p.add_argument("--llama-server", default=llama_default, help="llama-server binary (or LLAMA_BIN/llama-server)")
    p.add_argument("--model", default=env("MODEL", DEFAULT_MODEL))
    p.add_argument("--logs", metavar="DIR", help="keep the servers' logs here (default: a temporary folder)")
    for name, default in [("rounds", 2), ("doc_tokens", 4096), ("questions", 16), ("tokens", 32), ("docs", 32),
                          ("doc_passes", 2), ("caches", 4), ("threads", 2), ("concurrency", 1), ("budget", 128),
                          ("seed", 1), ("ready_timeout", 300), ("request_timeout", 1800)]:
        p.add_argument("--" + name.replace("_", "-"), type=int, default=int(env(name.upper(), default)))
    p.add_argument("--press", default=env("PRESS", "snapkv"))
    p.add_argument("--scenarios", default=env("SCENARIOS", "A,B"), help="A, B or A,B")
    a = p.parse_args()
    a.scenarios = [s.strip().upper() for s in a.scenarios.split(",") if s.strip()]
    bad = [s for s in a.scenarios if s not in ("A", "B")]
    if bad:
        p.error(f"unknown scenario {bad[0]!r}: A or B")
    for name in ("rounds", "doc_tokens", "questions", "tokens", "docs", "doc_passes", "caches", "threads",
                 "concurrency", "budget", "ready_timeout", "request_timeout"):
        if getattr(a, name) < 1:
            p.error(f"{name.upper()} must be at least 1, not {getattr(a, name)}")
    if a.doc_tokens < 64:
        p.error(f"DOC_TOKENS must be at least 64, not {a.doc_tokens}")
    if not a.llama_server:
        p.error("set LLAMA_BIN to the folder holding llama-server (or LLAMA_SERVER / --llama-server to the binary)")
    for path in (a.deferkv, a.llama_server):
        if not os.access(path, os.X_OK):
            p.error(f"not an executable: {path}")
    return a


# ---------------------------------------------------------------------------------------------
# Servers: every one is started here and stopped on any exit (normal, exception, Ctrl-C,
# SIGTERM/SIGHUP); PR_SET_PDEATHSIG kills them too if this script itself is killed outright.

RUNNING = []


def _die_with_parent():
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, argv, port, log_dir, ready_timeout, env=None):
        self.name, self.port = name, port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = os.path.join(log_dir, f"{name}.{port}.log")
        self.log = open(self.log_path, "wb")
        # A session of its own: a Ctrl-C reaches this script, which stops the servers itself.
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True, preexec_fn=_die_with_parent)
        RUNNING.append(self)
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with status {self.proc.returncode} before it was ready:\n"
                                   + self.log_tail())
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (OSError, urllib.error.HTTPError):
                pass  # not listening yet, or 503 while the model loads
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} was not ready after {timeout} s:\n" + self.log_tail())

    def log_tail(self, n=20):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # both servers finish cleanly on SIGTERM
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
        self.log.close()
        if self in RUNNING:
            RUNNING.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        if kind is not None and not issubclass(kind, (KeyboardInterrupt, SystemExit)) and self.proc.poll() is None:
            print(f"{self.name}'s log, last lines:\n{self.log_tail()}", file=sys.stderr)
        self.stop()


def stop_all():
    for server in list(RUNNING):
        with contextlib.suppress(Exception):
            server.stop()


def _on_signal(signum, _frame):
    raise SystemExit(f"stopped by signal {signum}")  # unwinds through every `with Server` and finally


# ---------------------------------------------------------------------------------------------
# HTTP

class RequestFailed(RuntimeError):
    pass


def call(url, path, body=None, timeout=60, method=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data, {"Content-Type": "application/json"}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            text = r.read().decode()
    except urllib.error.HTTPError as e:
        raise RequestFailed(f"{method or ('POST' if body is not None else 'GET')} {path}: HTTP {e.code}: "
                            f"{e.read().decode(errors='replace')[:500]}") from None
    return text if path == "/metrics" else json.loads(text)


def metrics(url):
    """deferkv's Prometheus text as {name: value} (its series carry no labels that matter here)."""
    values = {}
    for line in call(url, "/metrics").splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                values[name] = float(value)
    return values


def run_requests(jobs, concurrency):
    """Runs every job (a callable returning a dict) on `concurrency` client threads, each taking
    the next job in order (a closed loop); returns the results in job order, each with its
    `seconds`, and the wall seconds of the whole."""
    results = [None] * len(jobs)
    errors = []
    next_job = iter(range(len(jobs)))
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                if errors:
                    return
                i = next(next_job, None)
            if i is None:
                return
            start = time.perf_counter()
            try:
                result = jobs[i]()
            except BaseException as e:  # reported by the main thread
                with lock:
                    errors.append(e)
                return
            result["seconds"] = time.perf_counter() - start
            results[i] = result

    start = time.perf_counter()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(min(concurrency, len(jobs)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    return results, wall


# ---------------------------------------------------------------------------------------------
# The two engines' requests. Both take token ids as they are (no BOS added to a list of ids).

class Deferkv:
    def __init__(self, args, model, ctx, kv_memory=None):
        self.args, self.model, self.ctx, self.kv_memory = args, model, ctx, kv_memory

    def start(self, name, log_dir):
        argv = [self.args.deferkv, "serve", "-m", self.model, "--host", "127.0.0.1", "--port", str(free_port()),
                "-t", str(self.args.threads), "-np", str(self.args.concurrency), "-c", str(self.ctx)]
        if self.kv_memory:
            argv += ["--kv-memory", str(self.kv_memory)]
        return Server(name, argv, int(argv[argv.index("--port") + 1]), log_dir, self.args.ready_timeout)

    def complete(self, url, prompt, max_tokens, extra):
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, **extra}
        r = call(url, "/v1/completions", body, self.args.request_timeout)
        usage = r["usage"]
        if usage["completion_tokens"] != max_tokens:
            raise RuntimeError(f"deferkv answered {usage['completion_tokens']} tokens, not {max_tokens} (ignore_eos)")
        return {"text": r["choices"][0]["text"], "usage": usage,
                "prompt_tokens": usage["prompt_tokens"],
                "cached_tokens": usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)}

    def make_context(self, url, doc_ids):
        body = {"prompt": doc_ids, "kv_press": self.args.press, "kv_budget": self.args.budget}
        return call(url, "/v1/contexts", body, self.args.request_timeout)


class LlamaServer:
    def __init__(self, args, model, ctx, cache_ram_mib=None):
        self.args, self.model, self.ctx, self.cache_ram_mib = args, model, ctx, cache_ram_mib
        self.env = dict(os.environ)
        lib = os.path.dirname(os.path.abspath(args.llama_server))
        old = self.env.get("LD_LIBRARY_PATH")
        self.env["LD_LIBRARY_PATH"] = lib + (":" + old if old else "")

    def start(self, name, log_dir):
        port = free_port()
        # -c is the whole KV cache; -np slots split it (no --kv-unified), so each slot holds ctx / np.
        argv = [self.args.llama_server, "-m", self.model, "--host", "127.0.0.1", "--port", str(port),
                "-t", str(self.args.threads), "-np", str(self.args.concurrency), "-c", str(self.ctx)]
        if self.cache_ram_mib is not None:
            argv += ["--cache-ram", str(self.cache_ram_mib)]
        if supports(self.args.llama_server, "--no-webui", self.env):
            argv.append("--no-webui")
        return Server(name, argv, port, log_dir, self.args.ready_timeout, self.env)

    def complete(self, url, prompt, max_tokens):
        body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0, "ignore_eos": True,
                "cache_prompt": True}
        try:
            r = call(url, "/completion", body, self.args.request_timeout)
        except RequestFailed as e:
            # llama-server runs every answer through its chat-output parser, even on /completion,
            # and a random-weight model's bytes can fail it ("does not match the expected
            # Content-only format"): HTTP 500 after the whole answer was generated (its log prints
            # the answer's timings first), so the time is spent as for any answer. Counted as
            # answered, without text, and reported; any other failure stops the run.
            if "does not match the expected" not in str(e):
                raise
            return {"text": None, "unparsed": True, "timings": {}, "prompt_tokens": len(prompt),
                    "prefilled_tokens": None, "cached_tokens": None}
        timings = r.get("timings", {})
        generated = timings.get("predicted_n", r.get("tokens_predicted"))
        if generated != max_tokens:
            raise RuntimeError(f"llama-server answered {generated} tokens, not {max_tokens} (ignore_eos)")
        # prompt_n: the prompt tokens it prefilled; cache_n: those it took from its cache.
        return {"text": r["content"], "timings": timings, "prompt_tokens": len(prompt),
                "prefilled_tokens": timings.get("prompt_n"), "cached_tokens": timings.get("cache_n")}


_SUPPORTS = {}


def supports(binary, flag, env):
    if (binary, flag) not in _SUPPORTS:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, env=env, timeout=60)
        _SUPPORTS[(binary, flag)] = flag in out.stdout + out.stderr
    return _SUPPORTS[(binary, flag)]


# ---------------------------------------------------------------------------------------------
# Documents and questions

def word_list(name):
    with open(os.path.join(WORDS_DIR, name)) as f:
        return sorted({w.strip().lower() for w in f if re.fullmatch(r"[A-Za-z]+", w.strip())})


def make_document(rng, tokenize, doc_tokens, n_questions, adjectives, nouns):
    """The longest haystack of needles whose ids (with BOS) are at most doc_tokens, and
    n_questions questions about keys drawn across it; all from rng."""
    most = doc_tokens // 8  # a needle line is more than 8 tokens
    keys, seen = [], set()
    while len(keys) < most:
        key = f"{rng.choice(adjectives)}-{rng.choice(nouns)}"
        if key not in seen:
            seen.add(key)
            keys.append(key)
    values = [rng.randrange(1_000_000, 10_000_000) for _ in keys]

    def text(n):
        return HEADER + "".join(NEEDLE.format(key=k, value=v) for k, v in zip(keys[:n], values[:n]))

    lo, hi = 1, most  # largest n with tokens(text(n)) <= doc_tokens, by bisection
    if len(tokenize(text(lo))) > doc_tokens:
        raise ValueError(f"DOC_TOKENS={doc_tokens} cannot hold one needle")
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tokenize(text(mid))) <= doc_tokens:
            lo = mid
        else:
            hi = mid - 1
    n = lo
    if n < n_questions:
        raise ValueError(f"a {doc_tokens}-token document holds {n} needles, fewer than {n_questions} questions")
    doc = text(n)
    doc_ids = tokenize(doc)
    questions = []
    for i in rng.sample(range(n), n_questions):
        q = QUESTION.format(key=keys[i])
        whole = tokenize(doc + q)
        if whole[:len(doc_ids)] != doc_ids:
            raise ValueError("the document's ids are not a prefix of the document + question's")
        questions.append({"key": keys[i], "expected": str(values[i]), "ids": whole[len(doc_ids):]})
    return {"ids": doc_ids, "needles": n, "questions": questions}


def kv_bytes_per_token(deferkv, model):
    """One token's KV bytes in every layer and KV head, as each engine counts them: llama.cpp's
    f16 K and V rows (layers x KV heads x (key + value dims) x 2 B), and deferkv's, which also
    counts each entry's 4-byte position (`KvCache::bytes_per_entry`: a press keeps different
    positions in each head)."""
    info = json.loads(subprocess.run([deferkv, "inspect", "-m", model, "--json"], capture_output=True,
                                     text=True, check=True, timeout=120).stdout)
    meta = {m["key"]: m.get("value") for m in info["metadata"]}
    arch = meta["general.architecture"]
    heads = int(meta[f"{arch}.attention.head_count"])
    kv_heads = int(meta.get(f"{arch}.attention.head_count_kv", heads))
    head_dim = int(meta[f"{arch}.embedding_length"]) // heads
    k_dim = int(meta.get(f"{arch}.attention.key_length", head_dim))
    v_dim = int(meta.get(f"{arch}.attention.value_length", head_dim))
    layers = int(meta[f"{arch}.block_count"])
    f16 = layers * kv_heads * (k_dim + v_dim) * 2
    ours = f16 + layers * kv_heads * 4
    return f16, ours, f"{layers} layers x {kv_heads} KV heads x ({k_dim} + {v_dim}) x 2 B"


# ---------------------------------------------------------------------------------------------
# The scenarios. Each side's run: a fresh server, a warm-up request, the timed part, stop.

def warm_up(url, engine, warm_ids):
    if isinstance(engine, Deferkv):
        engine.complete(url, warm_ids, 2, {"kv_press": "full"})
    else:
        engine.complete(url, warm_ids, 2)


def scenario_a(args, model, doc, ctx, log_dir):
    deferkv = Deferkv(args, model, ctx)
    llama = LlamaServer(args, model, ctx * args.concurrency)
    warm_ids = doc["ids"][:1] + doc["questions"][0]["ids"]
    prompts = [doc["ids"] + q["ids"] for q in doc["questions"]]
    sides = ["deferkv-reuse", "deferkv-full", "llama-server"]
    rounds = []
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        results = {}
        for side in order:
            engine = llama if side == "llama-server" else deferkv
            with engine.start(f"A-{side}-r{r + 1}", log_dir) as server:
                warm_up(server.url, engine, warm_ids)
                start = time.perf_counter()
                context, create_s = None, 0.0
                if side == "deferkv-reuse":
                    context = deferkv.make_context(server.url, doc["ids"])
                    create_s = time.perf_counter() - start
                    jobs = [lambda q=q: deferkv.complete(server.url, q["ids"], args.tokens,
                                                         {"kv_context": context["id"]})
                            for q in doc["questions"]]
                elif side == "deferkv-full":
                    jobs = [lambda p=p: deferkv.complete(server.url, p, args.tokens, {"kv_press": "full"})
                            for p in prompts]
                else:
                    jobs = [lambda p=p: llama.complete(server.url, p, args.tokens) for p in prompts]
                answers, _ = run_requests(jobs, args.concurrency)
                total = time.perf_counter() - start
            results[side] = {"order": order.index(side), "seconds": total, "create_seconds": create_s,
                             "context": context, "answers": answers,
                             "questions_per_s": len(jobs) / total}
        rounds.append(results)
        print(f"  round {r + 1}: " + ", ".join(f"{s} {results[s]['questions_per_s']:.3f} q/s" for s in order),
              flush=True)
    return rounds


def scenario_b(args, model, docs, ctx, bpt, our_bpt, log_dir):
    # The cap holds CACHES full caches of one whole request (document + question + answer) in
    # each engine's own count: deferkv's --kv-memory in its bytes (positions included);
    # llama-server's -c and --cache-ram the same bytes of f16 KV, as the issue sets them. -c is
    # tokens of KV for all its slots (cap / bytes per token = CACHES whole requests; with -np N
    # each slot gets a 1/N share, which must hold one request); --cache-ram, the host-RAM cache
    # of prompts that left the slot, is in MiB, rounded to the nearest. So llama-server holds
    # the cap twice (the slot's KV and the RAM cache), which can only help it.
    full_cache = bpt * ctx
    cap = args.caches * full_cache
    llama_ctx = cap // bpt
    if llama_ctx // args.concurrency < ctx:
        raise SystemExit(f"CONCURRENCY={args.concurrency} slots of -c {llama_ctx} leave each less than one "
                         f"request ({ctx} tokens): CONCURRENCY must be at most CACHES={args.caches}")
    cache_ram_mib = max(1, round(cap / 2**20))
    our_cap = args.caches * our_bpt * ctx
    deferkv = Deferkv(args, model, ctx, kv_memory=our_cap)
    llama = LlamaServer(args, model, llama_ctx, cache_ram_mib)
    order_of_questions = [(d, p) for p in range(args.doc_passes) for d in range(len(docs))]
    warm_ids = docs[0]["ids"][:1] + docs[0]["questions"][0]["ids"]
    sides = ["deferkv-contexts", "llama-server"]
    setup = {"full_cache_bytes": full_cache, "kv_memory": our_cap, "llama_ctx": llama_ctx,
             "llama_cache_ram_mib": cache_ram_mib}
    rounds = []
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        results = {}
        for side in order:
            engine = llama if side == "llama-server" else deferkv
            with engine.start(f"B-{side}-r{r + 1}", log_dir) as server:
                warm_up(server.url, engine, warm_ids)
                state = {}
                start = time.perf_counter()
                if side == "deferkv-contexts":
                    made, _ = run_requests([lambda d=d: deferkv.make_context(server.url, d["ids"]) for d in docs],
                                           args.concurrency)
                    ids = [c["id"] for c in made]
                    setup_s = time.perf_counter() - start
                    state["after_setup"] = context_state(server.url, ids)
                    jobs = [lambda d=d, p=p: deferkv.complete(server.url, docs[d]["questions"][p]["ids"], args.tokens,
                                                              {"kv_context": ids[d]})
                            for d, p in order_of_questions]
                else:
                    made, _ = run_requests([lambda d=d: llama.complete(server.url, d["ids"], 1) for d in docs],
                                           args.concurrency)
                    setup_s = time.perf_counter() - start
                    jobs = [lambda d=d, p=p: llama.complete(server.url, docs[d]["ids"] + docs[d]["questions"][p]["ids"],
                                                            args.tokens)
                            for d, p in order_of_questions]
                answers, questions_s = run_requests(jobs, args.concurrency)
                total = time.perf_counter() - start
                if side == "deferkv-contexts":
                    state["after_questions"] = context_state(server.url, ids)
            for a, (d, p) in zip(answers, order_of_questions):
                a["doc"], a["question"] = d, p
            results[side] = {"order": order.index(side), "setup_seconds": setup_s, "questions_seconds": questions_s,
                             "seconds": total, "setup": made, "answers": answers, **state,
                             "questions_per_s": len(jobs) / questions_s,
                             "questions_per_s_with_setup": len(jobs) / total}
        rounds.append(results)
        print(f"  round {r + 1}: " + ", ".join(
            f"{s} {results[s]['questions_per_s']:.3f} q/s ({results[s]['questions_per_s_with_setup']:.3f} with setup)"
            for s in order), flush=True)
    return setup, rounds


def context_state(url, ids):
    listing = call(url, "/v1/contexts")["data"]
    resident = {c["id"] for c in listing if c.get("resident")}
    m = metrics(url)
    return {"listed": len(listing), "ours_resident": sum(i in resident for i in ids), "ours": len(ids),
            **{k: m.get(k) for k in ("deferkv_contexts_resident", "deferkv_contexts_spilled", "deferkv_context_bytes",
                                     "deferkv_contexts_dropped_total", "deferkv_context_hits_total",
                                     "deferkv_context_misses_total", "deferkv_kv_bytes_capacity")}}


# ---------------------------------------------------------------------------------------------
# Report

def med(values):
    return statistics.median(values)


def side_table(rounds, sides, key, label):
    n = len(rounds)
    print(f"| side | {' | '.join(f'round {r + 1}' for r in range(n))} | median {label} |")
    print("| --- | " + " | ".join("---:" for _ in range(n + 1)) + " |")
    for s in sides:
        values = [rd[s][key] for rd in rounds]
        print(f"| {s} | " + " | ".join(f"{v:.3f}" for v in values) + f" | {med(values):.3f} |")


def ratio_line(rounds, a, b, key, target, what=""):
    per_round = [rd[a][key] / rd[b][key] for rd in rounds]
    ratio = med([rd[a][key] for rd in rounds]) / med([rd[b][key] for rd in rounds])
    print(f"- {a} / {b}{what}: **{ratio:.2f}x** (ratio of the medians; per round "
          + ", ".join(f"{x:.2f}" for x in per_round) + f"; target >= {target}x)")
    return ratio


def cpu_name():
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def version(argv, env=None):
    with contextlib.suppress(Exception):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
        named = [ln for ln in lines if "version" in ln.lower()]  # llama-server adds a "built with" line
        return " ".join(((named or lines)[-1] if lines else "").split())
    return "unknown"


def main():
    args = settings()
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored (`&`)
    if not os.path.exists(args.model):
        if os.path.abspath(args.model) != DEFAULT_MODEL:
            raise SystemExit(f"model not found: {args.model}")
        os.makedirs(os.path.dirname(DEFAULT_MODEL), exist_ok=True)
        subprocess.run([args.deferkv, "make-model", "--preset", "100m", "--type", "q8_0", "--vocab",
                        os.path.join(ROOT, "tests", "data", "vocab", "ggml-vocab-llama-spm.gguf"), "-o", DEFAULT_MODEL],
                       check=True)
    log_dir = args.logs or tempfile.mkdtemp(prefix="contexts-bench-")
    os.makedirs(log_dir, exist_ok=True)
    lib = os.path.dirname(os.path.abspath(args.llama_server))
    report = {"cpu": cpu_name(), "cores": os.cpu_count(), "model": os.path.abspath(args.model),
              "deferkv_version": version([args.deferkv, "--version"]),
              "llama_server_version": version([args.llama_server, "--version"],
                                              dict(os.environ, LD_LIBRARY_PATH=lib)),
              "settings": {k: v for k, v in vars(args).items() if k not in ("json",)}}
    bpt, our_bpt, bpt_how = kv_bytes_per_token(args.deferkv, args.model)
    report["kv_bytes_per_token"] = {"f16": bpt, "deferkv": our_bpt}

    # Documents: tokenized by a deferkv server of the same model, not timed.
    adjectives, nouns = word_list("adjectivelist.txt"), word_list("nounlist.txt")
    with Deferkv(args, args.model, args.doc_tokens + 512).start("tokenizer", log_dir) as server:
        def tokenize(text):
            return call(server.url, "/tokenize", {"content": text, "add_special": True})["tokens"]
        doc_a = make_document(random.Random(args.seed), tokenize, args.doc_tokens, args.questions, adjectives, nouns) \
            if "A" in args.scenarios else None
        docs_b = [make_document(random.Random(f"{args.seed}/{d}"), tokenize, args.doc_tokens, args.doc_passes,
                                adjectives, nouns) for d in range(args.docs)] if "B" in args.scenarios else None
        # deferkv's own count of a full cache's bytes, beside the model's arithmetic.
        probe = Deferkv(args, args.model, 0).complete(server.url, tokenize(HEADER), 1, {"kv_press": "full"})
        probe_tokens = probe["prompt_tokens"]
        probe_bytes = probe["usage"].get("kv_bytes")

    print(f"# Compressed contexts against llama-server ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print(f"- CPU: {report['cpu']} ({report['cores']} logical cores seen)")
    print(f"- deferkv: {report['deferkv_version']}; llama-server: {report['llama_server_version']}")
    print(f"- model: {report['model']}; -t {args.threads}; greedy; {args.tokens} answer tokens (ignore_eos); "
          f"client concurrency and -np {args.concurrency}; {args.rounds} rounds, sides alternating")
    print(f"- KV bytes per token: {bpt} in f16 = {bpt_how}; {our_bpt} as deferkv counts them (+ 4 B of position "
          f"an entry); its usage.kv_bytes after a {probe_tokens}-token full-cache request and 1 answer token: "
          f"{probe_bytes} = {probe_bytes / our_bpt:.2f} tokens")
    if probe_bytes != our_bpt * (probe_tokens + 1):
        print(f"  WARNING: expected {our_bpt * (probe_tokens + 1)}: the caps below are not what deferkv counts")
    load = os.getloadavg()
    report["load_average_at_start"] = load
    print(f"- load average at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (a busy machine slows "
          f"llama-server's spinning thread pool most: bench/README.md, \"Threads that share the machine\")")
    print(f"- server logs: {log_dir}\n")

    try:
        if doc_a:
            q_max = max(len(q["ids"]) for q in doc_a["questions"])
            ctx = len(doc_a["ids"]) + q_max + args.tokens
            print(f"## Scenario A: one document of {len(doc_a['ids'])} tokens ({doc_a['needles']} needles), "
                  f"{args.questions} questions of up to {q_max} tokens, -c {ctx}\n", flush=True)
            rounds = scenario_a(args, args.model, doc_a, ctx, log_dir)
            report["A"] = {"doc_tokens": len(doc_a["ids"]), "ctx": ctx, "questions": doc_a["questions"],
                           "rounds": rounds}
            sides = ["deferkv-reuse", "deferkv-full", "llama-server"]
            print("\nQuestions per second (the context's creation counted in deferkv-reuse):\n")
            side_table(rounds, sides, "questions_per_s", "q/s")
            print()
            report["A"]["ratio_reuse_full"] = ratio_line(rounds, "deferkv-reuse", "deferkv-full", "questions_per_s", 8)
            report["A"]["ratio_reuse_llama"] = ratio_line(rounds, "deferkv-reuse", "llama-server", "questions_per_s", 2)
            first = rounds[0]
            ctxinfo = first["deferkv-reuse"]["context"]
            print(f"- deferkv's context: {ctxinfo['prompt_tokens']} tokens, {ctxinfo['kv_entries_kept']} entries kept, "
                  f"{ctxinfo['kv_bytes']} bytes, press {ctxinfo['kv_press']}; created in "
                  + ", ".join(f"{rd['deferkv-reuse']['create_seconds']:.3f}" for rd in rounds) + " s")
            llama_cached = [a["cached_tokens"] for a in first["llama-server"]["answers"]]
            print(f"- llama-server's tokens taken from its cache per question (round 1): {llama_cached}")
            # The same tokens through the same full cache: both engines should mostly agree.
            same = sum(x["text"] == y["text"] for rd in rounds
                       for x, y in zip(rd["deferkv-full"]["answers"], rd["llama-server"]["answers"]))
            unparsed = sum(bool(a.get("unparsed")) for rd in rounds for a in rd["llama-server"]["answers"])
            if unparsed:
                print(f"- llama-server failed to return the text of {unparsed} answers (its chat-output parser "
                      "refused the random model's bytes after generating them: HTTP 500, timed as answered)")
            print(f"- deferkv-full and llama-server (both the full cache) gave the same text for {same} of "
                  f"{args.questions * args.rounds} answers")
            print("\nThe first answers (round 1; different caches, so different texts are expected):\n")
            for i, q in enumerate(doc_a["questions"][:2]):
                print(f"- question {i + 1}: the number for {q['key']} (in the document: {q['expected']})")
                for side in ("deferkv-reuse", "llama-server"):
                    print(f"  - {side}: {first[side]['answers'][i]['text']!r}")
            print(flush=True)

        if docs_b:
            q_max = max(len(q["ids"]) for d in docs_b for q in d["questions"])
            doc_max = max(len(d["ids"]) for d in docs_b)
            ctx = doc_max + q_max + args.tokens
            n_q = args.docs * args.doc_passes
            print(f"## Scenario B: {args.docs} documents of up to {doc_max} tokens, {n_q} questions "
                  f"({args.doc_passes} passes round robin), memory for {args.caches} full caches\n", flush=True)
            setup, rounds = scenario_b(args, args.model, docs_b, ctx, bpt, our_bpt, log_dir)
            report["B"] = {"ctx": ctx, **setup, "docs": [{"tokens": len(d["ids"]), "questions": d["questions"]}
                                                         for d in docs_b], "rounds": rounds}
            print(f"\nCap: one full cache {setup['full_cache_bytes']} bytes of f16 KV ({ctx} tokens x {bpt}); "
                  f"deferkv `--kv-memory {setup['kv_memory']}` ({args.caches} x {ctx} x {our_bpt}); "
                  f"llama-server `-c {setup['llama_ctx']} "
                  f"--cache-ram {setup['llama_cache_ram_mib']}` (MiB)\n")
            sides = ["deferkv-contexts", "llama-server"]
            print("Questions per second, the question phase (the documents made into contexts / sent once before):\n")
            side_table(rounds, sides, "questions_per_s", "q/s")
            print("\nQuestions per second, setup + questions:\n")
            side_table(rounds, sides, "questions_per_s_with_setup", "q/s")
            print()
            report["B"]["ratio"] = ratio_line(rounds, "deferkv-contexts", "llama-server", "questions_per_s", 5,
                                              ", question phase")
            report["B"]["ratio_with_setup"] = ratio_line(rounds, "deferkv-contexts", "llama-server",
                                                         "questions_per_s_with_setup", 5, ", setup + questions")
            for r, rd in enumerate(rounds):
                s = rd["deferkv-contexts"]
                a, b = s["after_setup"], s["after_questions"]
                ok = a["ours_resident"] == b["ours_resident"] == args.docs
                llama_hits = sum(1 for x in rd["llama-server"]["answers"]
                                 if (x["cached_tokens"] or 0) >= len(docs_b[x["doc"]]["ids"]))
                print(f"- round {r + 1}: deferkv contexts resident {a['ours_resident']}/{args.docs} after setup, "
                      f"{b['ours_resident']}/{args.docs} after the questions "
                      f"({'all stayed' if ok else 'NOT ALL RESIDENT'}); "
                      f"/metrics contexts_resident {b['deferkv_contexts_resident']:.0f}, dropped_total "
                      f"{b['deferkv_contexts_dropped_total']:.0f}, hits {b['deferkv_context_hits_total']:.0f}, misses "
                      f"{b['deferkv_context_misses_total']:.0f}, context bytes {b['deferkv_context_bytes']:.0f}; "
                      f"llama-server questions whose document came from its cache: {llama_hits}/{n_q}"
                      + "".join(f" ({u} answers' text refused by its output parser, timed as answered)"
                                for u in [sum(bool(x.get("unparsed")) for x in rd["llama-server"]["answers"])] if u))
            print(flush=True)
        report["load_average_at_end"] = os.getloadavg()
        print(f"Load average at the end: {' '.join(f'{x:.2f}' for x in report['load_average_at_end'])}")
    finally:
        stop_all()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
            print(f"raw results: {args.json}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        stop_all()
        sys.exit("interrupted; every server stopped")
    finally:
        stop_all()
