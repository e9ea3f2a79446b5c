"""deferkv: long-context LLM inference on the CPU with pluggable KV-cache compression.

    import deferkv
    model = deferkv.Model()                       # the embedded stories260K
    out = model.generate("Once upon a time", max_tokens=32, temperature=0,
                         press="deferkv:d=1", kv_budget=64)
    print(out.text, out.stop_reason, out.kv.bytes)

    ctx = model.compress(long_document, press="snapkv", kv_ratio=0.5)
    for q in questions:
        print(ctx.answer(q, max_tokens=32).text)  # ctx is unchanged by each answer
    ctx.save("doc.dkvctx")                        # and later, or in another process:
    ctx = deferkv.Context.load("doc.dkvctx", model)

    s = deferkv.Session(model, press="snapkv", kv_budget=64)   # one call at a time
    s.prefill(model.tokenize("Once upon a time"))
    s.logits.argmax(), s.kv_positions(layer=0, kv_head=0)     # NumPy arrays

    class MyScorer(deferkv.Scorer):                            # a press written in Python
        window = 32                                            # observe the last 32 prompt queries
        def score(self, layer):                                # one array per KV head; more = keep
            return [a[:c] for a, c in zip(layer.prompt_attention, layer.candidates)]
    model.generate(prompt, press=deferkv.Press(MyScorer(), alloc="adakv", d=2), kv_budget=64)

See docs/python.md in the deferkv checkout.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

# An installed package (pip install .) carries the embedded models and the evaluation data
# in share/; the engine finds them through DEFERKV_HOME unless the caller set it. Run from
# build/python, the package has no share/ and the engine finds the checkout's.
_SHARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "share")
if "DEFERKV_HOME" not in os.environ and os.path.isfile(os.path.join(_SHARE, "models", "stories260K.gguf")):
    os.environ["DEFERKV_HOME"] = _SHARE

from . import _deferkv  # noqa: E402  (after DEFERKV_HOME)
from . import eval  # deferkv.eval.run, the `deferkv eval` sweep
from ._deferkv import Error, Layer

__all__ = ["Error", "eval", "Model", "Session", "Checkpoint", "Context", "CompressedContext", "GenerateResult", "KvStats", "presses",
           "score", "Scorer", "Press", "Layer"]

Messages = Sequence[Mapping[str, str]]


@dataclass
class KvStats:
    """The KV cache after a generation (or a compression)."""

    press: str  #: the press as built, every default filled in ("full": none)
    entries: List[List[int]]  #: entries each (layer, KV head) holds, after eviction
    #: the original positions each (layer, KV head) holds, ascending (prompt positions are
    #: below the prompt's length; generated tokens follow)
    positions: List[List[List[int]]]
    bytes: int  #: bytes held now (keys, values, positions)
    peak_bytes: int  #: the most bytes held at once
    bytes_per_entry: int
    capture_seconds: float  #: the press's attention capture
    eviction_seconds: float  #: the press's choosing and evicting


@dataclass
class GenerateResult:
    """What generate() and CompressedContext.answer() return."""

    text: str  #: the continuation, its leading space kept
    tokens: List[int]  #: the generated token ids (the end-of-generation token excluded)
    #: "end_of_generation", "token_limit", "context_full" or "stop" (a stop string)
    stop_reason: str
    kv: KvStats
    timings: Dict[str, float] = field(default_factory=dict)  #: prefill/decode tokens and seconds
    prompt_tokens: int = 0
    seed: int = 0  #: the sampler's seed (drawn when none was given)


# What a Scorer declares it observes, with the type each takes (docs/python.md).
_CAPTURE_FIELDS = {"window": int, "protected_window": int, "all_prompt_queries": bool, "decode_steps": int,
                   "all_decode_queries": bool, "trigger_queries": bool, "gqa": str}


class Scorer:
    """A press's scorer written in Python: kvpress's ScorerPress, for deferkv.

    Subclass it and write score(layer); the engine calls it once per layer when the press's
    trigger fires, and the shared parts do the rest (allocation, selection, trigger: the
    parameters of deferkv.Press, as every C++ scorer takes them):

        class SnapKV(deferkv.Scorer):
            window = 32                       # the last 32 prompt queries' attention
            def score(self, layer):
                return [a[:c] for a, c in zip(layer.prompt_attention, layer.candidates)]

        model.generate(prompt, press=deferkv.Press(SnapKV(), alloc="adakv", d=2), kv_budget=64)

    score(layer) returns one 1-D array (or list) of numbers per KV head: a score for each of
    the head's layer.candidates[g] oldest entries, more is kept (extra values are ignored;
    NaN is an error). `layer` is a deferkv.Layer, readable during the call only.

    What it observes is declared by class attributes or constructor keywords (every value
    shows in the press's description, so in an eval's configuration):
        window: the last `window` prompt queries' attention is captured, averaged over them.
        protected_window: the newest entries always kept (None: `window`, as SnapKV's).
        all_prompt_queries: every prompt query's attention, summed (H2O's).
        decode_steps: the first d decode queries' attention, each apart (layer.decode_attention).
        all_decode_queries: per step, every decode query adds to the prompt's sums (H2O per step).
        trigger_queries: per step, the evicting step's query alone (TOVA's).
        gqa: over a KV head's query heads: "mean", "max" or "sum".
        name: the press's name in specs and reports (None: the class's name).
    """

    name: Optional[str] = None
    window: int = 0
    protected_window: Optional[int] = None
    all_prompt_queries: bool = False
    decode_steps: int = 0
    all_decode_queries: bool = False
    trigger_queries: bool = False
    gqa: str = "mean"

    def __init__(self, **declared: Any):
        for key, value in declared.items():
            if key != "name" and key not in _CAPTURE_FIELDS:
                raise TypeError(f"{type(self).__name__}: unknown keyword {key!r}; a Scorer declares name, "
                                f"{', '.join(_CAPTURE_FIELDS)} (allocation, selection and trigger are "
                                "deferkv.Press's parameters)")
            setattr(self, key, value)

    def score(self, layer: Any) -> Sequence[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define score(self, layer)")

    def press_name(self) -> str:
        """The name specs and reports give its press."""
        name = self.name if self.name is not None else type(self).__name__
        if not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}.name must be a str, got {name!r}")
        return name


def _add_scorer(scorer: Scorer) -> str:
    """Adds `scorer` to the engine's presses under its name (replacing the scorer of that name
    added before) and returns the name."""
    if not isinstance(scorer, Scorer):
        raise TypeError(f"a scorer must be a deferkv.Scorer, got {type(scorer).__name__}")
    name = scorer.press_name()
    capture = _deferkv._ScorerCapture()
    for key, kind in _CAPTURE_FIELDS.items():
        value = getattr(scorer, key)
        if key == "protected_window" and value is None:
            value = scorer.window
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"scorer {name!r}: {key} must be a {kind.__name__}, got {value!r}")
        setattr(capture, key, value)
    _deferkv.add_scorer(scorer, name, capture)
    return name


def _parameter_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Press:
    """A Scorer with the shared parameters of every scorer method: allocation (alloc, rounding,
    beta, alpha, profile), selection (chunk, reuse) and trigger (d, per_step, every, ratio_of), as
    `deferkv presses` lists them for snapkv, e.g. Press(MyScorer(), alloc="adakv", d=2).

    Wherever a press is taken (Model.generate, Model.compress, Session, Session.set_press,
    deferkv.eval.run), a Press, a bare Scorer (its defaults) or a spec string goes. `spec` is
    the press as a string, "name:alloc=adakv,d=2": it composes ("+") as any spec does, and
    names the scorer as long as no other scorer is given its name (the last one used wins).
    """

    def __init__(self, scorer: Scorer, **params: Any):
        self.scorer = scorer
        self.params = dict(params)
        name = _add_scorer(scorer)
        self.spec = name + (":" + ",".join(f"{k}={_parameter_text(v)}" for k, v in params.items()) if params else "")
        _deferkv.check_press(self.spec)  # ValueError naming a bad key or value now

    def __str__(self) -> str:
        return self.spec

    def __repr__(self) -> str:
        return f"deferkv.Press({self.spec!r})"

    def __add__(self, other: Any) -> str:
        return f"{_press_spec(self)}+{_press_spec(other)}"

    def __radd__(self, other: Any) -> str:
        return f"{_press_spec(other)}+{_press_spec(self)}"


PressLike = Union[str, Scorer, Press]


def _press_spec(press: Any) -> str:
    """The spec of a press given as a string, a Scorer or a Press (its scorer added again, so
    that the scorer given is the one that runs)."""
    if isinstance(press, str):
        return press
    if isinstance(press, Scorer):
        return Press(press).spec
    if isinstance(press, Press):
        _add_scorer(press.scorer)
        return press.spec
    raise TypeError(f"press must be a spec (str), a deferkv.Scorer or a deferkv.Press, got {type(press).__name__}")


def _max_tokens(max_tokens: Optional[int]) -> int:
    """The engine's max_tokens (-1: no limit); its range is checked by the engine, as the
    server's (1 to 2^20), with a ValueError naming max_tokens."""
    if max_tokens is None:
        return -1
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"max_tokens must be an int or None, got {max_tokens!r}")
    return max_tokens


def _budget(kv_budget: Optional[int], kv_ratio: Optional[float]) -> tuple:
    """kv_budget and kv_ratio with their types checked; their ranges are the engine's."""
    if kv_budget is not None and (isinstance(kv_budget, bool) or not isinstance(kv_budget, int)):
        raise TypeError(f"kv_budget must be an int (entries per KV head) or None, got {kv_budget!r}")
    if kv_ratio is not None and (isinstance(kv_ratio, bool) or not isinstance(kv_ratio, (int, float))):
        raise TypeError(f"kv_ratio must be a float or None, got {kv_ratio!r}")
    return (kv_budget, None if kv_ratio is None else float(kv_ratio))


def _stop(stop: Union[None, str, Sequence[str]]) -> List[str]:
    """Stop strings as a list (one string alone too), checked as the server's."""
    if stop is None:
        return []
    if isinstance(stop, str):
        strings = [stop]
    elif isinstance(stop, (list, tuple)):
        strings = list(stop)
    else:
        raise TypeError(f"stop must be a str or a sequence of str, got {stop!r}")
    for s in strings:
        if not isinstance(s, str):
            raise TypeError(f"stop must be a str or a sequence of str, got {s!r} in it")
    _deferkv.check_stop(strings)
    return strings


class _TextSteps:
    """The pieces of one generation, cut at the first stop string.

    A piece that could be the start of a stop string is held back until it is known not
    to be one, so a streamed text never shows part of a stop string."""

    def __init__(self, generation: Any, stop: Sequence[str]):
        self._generation = generation
        self._stop = list(stop)
        self._held = ""
        self._stopped_by_string = False

    def __iter__(self) -> Iterator[str]:
        # The decoder returns whole UTF-8 characters (it holds an unfinished one back).
        while True:
            step = self._generation.step()
            if step is None:
                tail = self._generation.finish().decode("utf-8", errors="replace")
                if tail or self._held:
                    yield self._held + tail
                self._held = ""
                return
            piece = self._held + step[1].decode("utf-8", errors="replace")
            cut = self._cut(piece)
            if cut is not None:
                self._stopped_by_string = True
                if piece[:cut]:
                    yield piece[:cut]
                return
            keep = self._held_back(piece)
            self._held = piece[len(piece) - keep:] if keep else ""
            if piece[: len(piece) - keep]:
                yield piece[: len(piece) - keep]

    def _cut(self, text: str) -> Optional[int]:
        found = [text.find(s) for s in self._stop if s in text]
        return min(found) if found else None

    def _held_back(self, text: str) -> int:
        """The longest end of `text` that begins a stop string."""
        longest = 0
        for s in self._stop:
            for n in range(min(len(s) - 1, len(text)), longest, -1):
                if s.startswith(text[-n:]):
                    longest = n
                    break
        return longest

    def result(self, text: str) -> GenerateResult:
        g = self._generation
        return GenerateResult(
            text=text,
            tokens=list(g.tokens),
            stop_reason="stop" if self._stopped_by_string else g.stop_reason,
            kv=KvStats(**g.kv),
            timings=dict(g.timings),
            prompt_tokens=g.prompt_tokens,
            seed=g.seed,
        )


class Model:
    """A GGUF model loaded for generation; sessions of it share the weights.

    Args:
        path: the GGUF file; None: the embedded stories260K (a tiny story writer).
        n_threads: threads for the forward pass; 0: every core this process may use (its
            CPU affinity, capped by a cgroup quota), as the CLI's -t.
        n_ctx: tokens a generation's cache holds; 0: the model's training context, at
            most 4096.
        cache_type_k, cache_type_v: how the KV cache stores keys and values: "f16" (the
            default, as llama.cpp's), "bf16", "f32", "q8_0" or "q4_0" (-ctk/-ctv of the CLI).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a bad n_threads, n_ctx or cache type.
        deferkv.Error: the file is not a model deferkv runs (the message names the key or
            tensor at fault).
    """

    def __init__(self, path: Optional[str] = None, n_threads: int = 0, n_ctx: int = 0,
                 cache_type_k: str = "f16", cache_type_v: str = "f16"):
        self._model = _deferkv._Model(None if path is None else str(path), n_threads, n_ctx, cache_type_k,
                                      cache_type_v)

    @property
    def n_threads(self) -> int:
        """The threads each generation's forward pass runs on."""
        return self._model.n_threads

    @property
    def cache_types(self) -> tuple:
        """(keys, values): the KV cache's storage types."""
        return (self._model.cache_type_k, self._model.cache_type_v)

    def tokenize(self, text: str, add_bos: bool = True, parse_special: bool = False) -> List[int]:
        """Token ids of `text`; `parse_special` reads text such as "<|im_start|>" as that token."""
        return self._model.tokenize(text, add_bos, parse_special)

    def detokenize(self, ids: Iterable[int]) -> str:
        """The text of `ids` (the space before the first word dropped). ValueError for an id
        outside the vocabulary."""
        return self._model.detokenize(list(ids)).decode("utf-8", errors="replace")

    @property
    def chat_template(self) -> str:
        """The Jinja chat template the model carries ("" when none)."""
        return self._model.chat_template

    @property
    def metadata(self) -> Dict[str, Any]:
        """The model's shape and names (architecture, n_layer, n_head_kv, n_ctx_train ...)."""
        return self._model.metadata

    def _prompt(self, prompt: Union[str, Sequence[int], Messages], chat_template: str) -> List[int]:
        if isinstance(prompt, str):
            return self._model.tokenize(prompt, True, False)
        if isinstance(prompt, (list, tuple)) and prompt:
            if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
                self._model.check_prompt_ids(list(prompt))
                return list(prompt)  # token ids, taken as they are
            if all(isinstance(m, Mapping) for m in prompt):
                messages = []
                for m in prompt:
                    role, content = m.get("role"), m.get("content")
                    if not isinstance(role, str) or not isinstance(content, str):
                        raise TypeError(f"a chat message needs a str 'role' and a str 'content', got {dict(m)!r}")
                    messages.append((role, content))
                return self._model.chat_prompt(messages, chat_template)
        if isinstance(prompt, (list, tuple)) and not prompt:
            raise ValueError("prompt must not be empty")
        raise TypeError("prompt must be a str, a list of token ids (int) or a list of chat messages "
                        f"({{'role': ..., 'content': ...}}), got {type(prompt).__name__}: {prompt!r:.80}")

    def generate(
        self,
        prompt: Union[str, Sequence[int], Messages],
        max_tokens: Optional[int] = 128,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        seed: Optional[int] = None,
        stop: Union[str, Sequence[str]] = (),
        press: PressLike = "full",
        kv_budget: Optional[int] = None,
        kv_ratio: Optional[float] = None,
        draft_model: Optional[str] = None,
        stream: bool = False,
        chat_template: str = "",
    ) -> Union[GenerateResult, Iterator[str]]:
        """Continues `prompt`, with the KV cache compressed by `press`.

        Args:
            prompt: text (tokenized with BOS), a list of token ids (taken as they are), or
                chat messages ([{"role": "user", "content": ...}], roles system, user,
                assistant) put in the model's chat format (or `chat_template`'s) with the
                assistant's turn opened.
            max_tokens: tokens to generate, 1 to 2^20; None (or -1): until the end of
                generation or a full context.
            temperature, top_k, top_p, min_p: sampling, as in `deferkv generate`
                (temperature 0: greedy).
            seed: the sampler's seed (None: a random one, reported in the result).
            stop: strings that end the text (not included in it): up to 16, none empty.
            press: the compression method and its parameters, e.g. "deferkv:d=1",
                "snapkv+moment_kv:decode_budget=512"; "full": none. See presses(). Or a
                press written in Python: a deferkv.Press or a deferkv.Scorer.
            kv_budget: entries kept per KV head on average (the papers' B = 128).
            kv_ratio: kvpress's compression ratio instead (0.5 keeps half the prompt).
            draft_model: a GGUF file with the same tokenizer, for presses that draft (speckv).
            stream: return an iterator of text pieces instead of a result.

        Returns:
            GenerateResult (text, tokens, stop_reason, kv, timings), or with stream=True an
            iterator of str pieces whose concatenation is the text.

        Raises:
            TypeError: a prompt or parameter of the wrong type (named in the message).
            ValueError: a bad parameter, named in the message: an unknown press or key, a bad
                budget, max_tokens, temperature (0 to 100), top_k (0 to 2^20), top_p in (0, 1],
                min_p in [0, 1), seed (>= 0), stop, a chat role; the server refuses the same
                values (deferkv/generation_params.h holds the one set of checks).
            deferkv.Error: the engine refused (e.g. the prompt does not fit in n_ctx).
            KeyboardInterrupt: Ctrl-C, between two tokens.

        The GIL is released while the engine computes, so other Python threads run.
        """
        limit = _max_tokens(max_tokens)
        stops = _stop(stop)
        kv_budget_entries, ratio = _budget(kv_budget, kv_ratio)
        generation = self._model.generation(
            self._prompt(prompt, chat_template), limit, temperature, top_k, top_p, min_p,
            seed, _press_spec(press), kv_budget_entries, ratio, draft_model)
        steps = _TextSteps(generation, stops)
        if stream:
            return iter(steps)
        return steps.result("".join(steps))

    def compress(
        self,
        context: str,
        press: PressLike = "full",
        kv_budget: Optional[int] = None,
        kv_ratio: Optional[float] = None,
    ) -> "Context":
        """Prefills `context` once with `press` (kvpress's question-agnostic compression).

        Answer questions about it with Context.answer(), as often as wanted (from several
        threads at once too); each question is read after the compressed context (as
        `deferkv generate --question-agnostic` reads it). Context.save() writes it to a file
        (docs/compressed_context.md). deferkv makes a deferred context: its candidate pool
        (pool=, e.g. "deferkv:pool=4x") and its window's scores, each answer evicting at its
        own decode step d. Another press that evicts after the prefill (per-step and
        decode-time presses) decides with the question: its context answers once and cannot
        be saved."""
        kv_budget_entries, ratio = _budget(kv_budget, kv_ratio)
        tokens = self._model.tokenize(context, True, False)
        return Context(self, self._model.compressed_session(tokens, _press_spec(press), kv_budget_entries, ratio))


class Context:
    """A context compressed once by Model.compress() or loaded by Context.load(); each
    answer leaves it unchanged."""

    def __init__(self, model: Model, compressed: Any):
        self._model = model
        self._compressed = compressed

    @staticmethod
    def load(path: Union[str, "os.PathLike[str]"], model: Model) -> "Context":
        """Reads a context saved by Context.save() (or `deferkv generate --save-context`).

        Raises FileNotFoundError for a missing file, and deferkv.Error for a file made for
        another model or cache types (naming the mismatch), or a corrupt or truncated one."""
        return Context(model, model._model.load_context(os.fspath(path)))

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the context to `path` atomically (docs/compressed_context.md)."""
        self._compressed.save(os.fspath(path))

    @property
    def press(self) -> str:
        """The press that compressed it, every parameter filled in ("full": none)."""
        return self._compressed.press

    @property
    def context_tokens(self) -> int:
        """Tokens of the context (before compression)."""
        return self._compressed.context_tokens

    @property
    def kv(self) -> KvStats:
        """The compressed context's KV cache."""
        return KvStats(**self._compressed.kv)

    def answer(
        self,
        question: str,
        max_tokens: Optional[int] = 128,
        temperature: float = 0.0,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        seed: Optional[int] = None,
        stop: Union[str, Sequence[str]] = (),
    ) -> GenerateResult:
        """Continues the compressed context with `question` (tokenized without BOS) and
        returns the answer; greedy by default. The context is put back afterwards.

        Raises deferkv.Error when the question does not fit in the context window, or
        when the press evicts after the prefill and this context has answered already."""
        limit = _max_tokens(max_tokens)
        stops = _stop(stop)
        tokens = self._model._model.tokenize(question, False, False)
        generation = self._model._model.answer_generation(
            self._compressed, tokens, limit, temperature, top_k, top_p, min_p, seed)
        try:
            steps = _TextSteps(generation, stops)
            return steps.result("".join(steps))
        finally:
            self._compressed.restore()


# The name this class had before contexts could be saved and shared.
CompressedContext = Context


class Checkpoint:
    """A saved state of a Session (its cache, position and logits), from Session.checkpoint()."""

    def __init__(self, checkpoint: Any):
        self._checkpoint = checkpoint

    @property
    def n_past(self) -> int:
        """Tokens the session held when the checkpoint was taken."""
        return self._checkpoint.n_past


class Session:
    """The engine one call at a time, for research: prefill, decode, logits and the KV cache
    per (layer, KV head) as NumPy arrays (NumPy is needed for this class only).

        s = deferkv.Session(model, press="snapkv", kv_budget=64)
        s.prefill(model.tokenize(document))          # the press evicts at its trigger
        s.kv_positions(0, 0)                          # original positions kept by layer 0, head 0
        saved = s.checkpoint()
        s.decode(int(s.logits.argmax()))
        s.rollback(saved)                             # cache, position and logits as saved

    Args:
        model: the Model whose weights the session uses.
        n_ctx: tokens the cache holds; None: the model's (Model's n_ctx, else its training
            context, at most 4096).
        n_batch: prompt tokens per forward pass.
        all_logits: keep the logits of every position of the last prefill ([n_tokens, n_vocab]).
        press, kv_budget, kv_ratio, draft_model: as in Model.generate().
        cache_type_k, cache_type_v: storage types; None: the Model's.

    The GIL is released while the engine computes. The press's own state is not part of a
    checkpoint (as in the C++ Session): a one-shot press has evicted already; a press that
    evicts during decoding keeps counting its steps from the last prefill.
    """

    def __init__(self, model: Model, n_ctx: Optional[int] = None, n_batch: int = 512, all_logits: bool = False,
                 press: PressLike = "full", kv_budget: Optional[int] = None, kv_ratio: Optional[float] = None,
                 draft_model: Optional[str] = None, cache_type_k: Optional[str] = None,
                 cache_type_v: Optional[str] = None):
        kv_budget_entries, ratio = _budget(kv_budget, kv_ratio)
        self._session = _deferkv._Session(model._model, 0 if n_ctx is None else n_ctx, n_batch, all_logits,
                                          _press_spec(press),
                                          kv_budget_entries, ratio, draft_model, cache_type_k, cache_type_v)

    def prefill(self, tokens: Iterable[int]) -> None:
        """Feeds `tokens` (ints, or a NumPy integer array) at the next positions; the press
        sees their attention and evicts at its trigger. deferkv.Error when they do not fit
        in n_ctx (the session is then unchanged); ValueError for an id outside the vocabulary."""
        self._session.prefill(_token_list(tokens))

    def decode(self, token: int) -> None:
        """Feeds one token (the one sampled from `logits`)."""
        self._session.decode(int(token))

    @property
    def logits(self) -> Any:
        """float32 NumPy array of the last token's logits, [n_vocab] (with all_logits after a
        prefill: [n_tokens, n_vocab]). A copy: it stays as it is after later calls."""
        return self._session.logits

    @property
    def n_past(self) -> int:
        """Tokens fed so far (the next token's position)."""
        return self._session.n_past

    @property
    def n_ctx(self) -> int:
        return self._session.n_ctx

    def truncate(self, n_past: int) -> None:
        """Forgets every token at position >= n_past."""
        self._session.truncate(n_past)

    def checkpoint(self) -> Checkpoint:
        """A copy of the cache, position and logits, for rollback()."""
        return Checkpoint(self._session.checkpoint())

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Puts the cache, position and logits back as `checkpoint` saved them (ValueError for
        another Session's checkpoint)."""
        self._session.rollback(checkpoint._checkpoint)

    def set_press(self, press: PressLike, kv_budget: Optional[int] = None, kv_ratio: Optional[float] = None) -> None:
        """Replaces the press ("full": none); it acts from the next prefill or decode step on."""
        kv_budget_entries, ratio = _budget(kv_budget, kv_ratio)
        self._session.set_press(_press_spec(press), kv_budget_entries, ratio)

    @property
    def press(self) -> str:
        """The press as built, every default filled in ("full": none)."""
        return self._session.press

    @property
    def kv(self) -> KvStats:
        """Entries per (layer, KV head), bytes now and at peak, the press's seconds."""
        return KvStats(**self._session.kv)

    @property
    def last_eviction(self) -> Optional[Dict[str, Any]]:
        """The cache right after the last eviction that removed entries: decode_step (0: at the
        end of the prefill), n_past, layer_entries, layer_bytes, bytes; None before any."""
        return self._session.last_eviction

    @property
    def timings(self) -> Dict[str, float]:
        return dict(self._session.timings)

    def kv_positions(self, layer: int, kv_head: int) -> Any:
        """int32 array: the original positions of the entries (layer, kv_head) holds, ascending.
        IndexError for a layer or head the model does not have."""
        return self._session.kv_positions(layer, kv_head)

    def kv_keys(self, layer: int, kv_head: int) -> Any:
        """float32 array [entries, head_dim]: the stored keys (after RoPE), dequantised."""
        return self._session.kv_keys(layer, kv_head)

    def kv_values(self, layer: int, kv_head: int) -> Any:
        """float32 array [entries, head_dim]: the stored values, dequantised."""
        return self._session.kv_values(layer, kv_head)

    def kept(self) -> List[List[Any]]:
        """kv_positions of every head: [layer][kv_head] -> int32 array."""
        entries = self.kv.entries
        n_layer, n_head_kv = len(entries), len(entries[0])
        return [[self.kv_positions(l, h) for h in range(n_head_kv)] for l in range(n_layer)]


def _token_list(tokens: Iterable[int]) -> List[int]:
    """Token ids as a list of ints (a NumPy array's too); ValueError for a non-integer."""
    out = []
    for t in tokens:
        if isinstance(t, bool) or int(t) != t:
            raise ValueError(f"token ids are integers, got {t!r}")
        out.append(int(t))
    return out


def presses() -> List[Dict[str, Any]]:
    """Every KV-compression method: name, summary, paper, uses_budget and parameters
    (each a dict of name, default and help)."""
    return _deferkv.presses()


def score(rows: Iterable[Mapping[str, Any]], benchmark: Optional[str] = None) -> Dict[str, Any]:
    """Scores predictions with the official metrics.

    Args:
        rows: dicts as in a predictions JSONL file, e.g. LongBench's {"dataset", "pred",
            "answers", "all_classes"}, RULER's {"task", "pred", "outputs"}, NIAH's
            {"pred", "needle"}; rows with a "label" are scored apart per label.
        benchmark: "longbench", "ruler" or "niah"; None: from the first row's fields.

    Returns:
        {"benchmark": name, "rows": [{"label", "length", "average", "groups": [{"name",
        "samples", "score"}]}]}; pd.DataFrame(result["rows"]) makes a table.

    Raises:
        ValueError: an unknown benchmark. deferkv.Error: a bad row (named by its number).
    """
    text = "".join(json.dumps(dict(r)) + "\n" for r in rows)
    return _deferkv.score(text, benchmark)
