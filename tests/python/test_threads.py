"""The GIL is released while the engine computes, and Ctrl-C stops a generation."""
import _thread
import os
import pathlib
import signal
import sys
import threading
import time

import pytest

import deferkv

PROMPT = "Once upon a time, there was a little girl named Lily."


def test_another_thread_runs_while_generate_computes(model):
    # With a long switch interval a thread holding the GIL keeps it: the main thread gets
    # to run only while the generating thread has released it inside the engine. Only the
    # turns after the first piece count, so the prefill's own release is not what is tested.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(30)
    try:
        pieces = []

        def generate():
            for piece in model.generate(PROMPT, max_tokens=200, temperature=0, stream=True):
                pieces.append(piece)

        worker = threading.Thread(target=generate)
        worker.start()
        turns_while_decoding = 0
        while worker.is_alive():
            if pieces:
                turns_while_decoding += 1
            time.sleep(0)  # hands the GIL to the worker whenever it wants it back
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert "".join(pieces) == model.generate(PROMPT, max_tokens=200, temperature=0).text
    # Holding the GIL through each step leaves the main thread at most one turn after the
    # first piece; releasing it gives up to one per token, fewer on a loaded machine where
    # the engine's threads take both cores (35 of 200 in one CI run).
    assert turns_while_decoding >= 10


def test_ctrl_c_stops_a_generation_between_tokens(model):
    # Python's own Ctrl-C handler, even where the test runner was started with SIGINT ignored
    # (a background job of a non-interactive shell), in which case interrupt_main does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    pieces = model.generate(PROMPT, max_tokens=200, temperature=0, stream=True)
    next(pieces)
    seen = 1
    try:
        with pytest.raises(KeyboardInterrupt):
            _thread.interrupt_main()  # as SIGINT does
            for _ in pieces:
                seen += 1
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen < 10  # it stopped at once, not at the end of the 200 tokens
    assert len(model.generate(PROMPT, max_tokens=5, temperature=0).tokens) == 5  # the model still works


def test_threads_default_to_every_core_this_process_may_use(model_path):
    cores = len(os.sched_getaffinity(0))
    try:
        quota = pathlib.Path("/sys/fs/cgroup/cpu.max").read_text().split()[0]
    except OSError:
        quota = "max"
    default = deferkv.Model(model_path).n_threads
    if quota == "max":  # no cgroup quota: the affinity decides alone
        assert default == cores
    else:
        assert 1 <= default <= cores
    assert deferkv.Model(model_path, n_threads=2).n_threads == 2
    with pytest.raises(ValueError, match="n_threads"):
        deferkv.Model(model_path, n_threads=-1)
