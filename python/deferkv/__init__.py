"""deferkv: long-context LLM inference on the CPU with pluggable KV-cache compression.

    import deferkv
    model = deferkv.Model()                       # the embedded stories260K
    out = model.generate("Once upon a time", max_tokens=32, temperature=0,
                         press="deferkv:d=1", kv_budget=16)
    print(out.text, out.stop_reason, out.kv.bytes)

    ctx = model.compress(long_document, press="snapkv", kv_ratio=0.5)
    for q in questions:
        print(ctx.answer(q, max_tokens=32).text)  # ctx is unchanged by each answer

See docs/python.md in the deferkv checkout.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import _deferkv
from ._deferkv import Error

__all__ = ["Error", "Model", "CompressedContext", "GenerateResult", "KvStats", "presses", "score"]

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


def _check_max_tokens(max_tokens: int) -> None:
    if not isinstance(max_tokens, int) or max_tokens < -1:
        raise ValueError(f"max_tokens must be a non-negative int (or -1: no limit), got {max_tokens!r}")


def _budget(kv_budget: Optional[int], kv_ratio: Optional[float]) -> tuple:
    if kv_budget is not None and (not isinstance(kv_budget, int) or kv_budget <= 0):
        raise ValueError(f"kv_budget must be a positive int (entries per KV head), got {kv_budget!r}")
    return (0 if kv_budget is None else kv_budget, -1.0 if kv_ratio is None else float(kv_ratio))


class _TextSteps:
    """The pieces of one generation, cut at the first stop string.

    A piece that could be the start of a stop string is held back until it is known not
    to be one, so a streamed text never shows part of a stop string."""

    def __init__(self, generation: Any, stop: Sequence[str]):
        self._generation = generation
        self._stop = [s for s in stop if s]
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
        n_threads: threads for the forward pass.
        n_ctx: tokens a generation's cache holds; 0: the model's training context, at
            most 4096.

    Raises:
        FileNotFoundError: the file does not exist.
        deferkv.Error: the file is not a model deferkv runs (the message names the key or
            tensor at fault).
    """

    def __init__(self, path: Optional[str] = None, n_threads: int = 1, n_ctx: int = 0):
        self._model = _deferkv._Model(None if path is None else str(path), n_threads, n_ctx)

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

    def _prompt(self, prompt: Union[str, Messages], chat_template: str) -> List[int]:
        if isinstance(prompt, str):
            return self._model.tokenize(prompt, True, False)
        messages = [(m["role"], m["content"]) for m in prompt]
        return self._model.chat_prompt(messages, chat_template)

    def generate(
        self,
        prompt: Union[str, Messages],
        max_tokens: int = 128,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        seed: Optional[int] = None,
        stop: Sequence[str] = (),
        press: str = "full",
        kv_budget: Optional[int] = None,
        kv_ratio: Optional[float] = None,
        draft_model: Optional[str] = None,
        stream: bool = False,
        chat_template: str = "",
    ) -> Union[GenerateResult, Iterator[str]]:
        """Continues `prompt`, with the KV cache compressed by `press`.

        Args:
            prompt: text (tokenized with BOS), or chat messages
                ([{"role": "user", "content": ...}]) put in the model's chat format
                (or `chat_template`'s) with the assistant's turn opened.
            max_tokens: tokens to generate; -1: until the end of generation or a full context.
            temperature, top_k, top_p, min_p: sampling, as in `deferkv generate`
                (temperature 0: greedy).
            seed: the sampler's seed (None: a random one, reported in the result).
            stop: strings that end the text (not included in it).
            press: the compression method and its parameters, e.g. "deferkv:d=1",
                "snapkv+moment_kv:decode_budget=512"; "full": none. See presses().
            kv_budget: entries kept per KV head on average (the papers' B = 128).
            kv_ratio: kvpress's compression ratio instead (0.5 keeps half the prompt).
            draft_model: a GGUF file with the same tokenizer, for presses that draft (speckv).
            stream: return an iterator of text pieces instead of a result.

        Returns:
            GenerateResult (text, tokens, stop_reason, kv, timings), or with stream=True an
            iterator of str pieces whose concatenation is the text.

        Raises:
            ValueError: a bad parameter (unknown press or key, bad budget, sampling range).
            deferkv.Error: the engine refused (e.g. the prompt does not fit in n_ctx).
            KeyboardInterrupt: Ctrl-C, between two tokens.

        The GIL is released while the engine computes, so other Python threads run.
        """
        _check_max_tokens(max_tokens)
        kv_budget_entries, ratio = _budget(kv_budget, kv_ratio)
        generation = self._model.generation(
            self._prompt(prompt, chat_template), max_tokens, temperature, top_k, top_p, min_p,
            -1 if seed is None else seed, press, kv_budget_entries, ratio, draft_model)
        steps = _TextSteps(generation, stop)
        if stream:
            return iter(steps)
        return steps.result("".join(steps))

    def compress(
        self,
        context: str,
        press: str = "full",
        kv_budget: Optional[int] = None,
        kv_ratio: Optional[float] = None,
    ) -> "CompressedContext":
        """Prefills `context` once with `press` (kvpress's question-agnostic compression).

        Answer questions about it with CompressedContext.answer(), as often as wanted;
        the question is read uncompressed after the compressed context."""
        kv_budget_entries, ratio = _budget(kv_budget, kv_ratio)
        tokens = self._model.tokenize(context, True, False)
        return CompressedContext(self, self._model.compressed_session(tokens, press, kv_budget_entries, ratio))


class CompressedContext:
    """A context compressed once by Model.compress(); each answer leaves it unchanged."""

    def __init__(self, model: Model, compressed: Any):
        self._model = model
        self._compressed = compressed

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
        max_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        seed: Optional[int] = None,
        stop: Sequence[str] = (),
    ) -> GenerateResult:
        """Continues the compressed context with `question` (tokenized without BOS) and
        returns the answer; greedy by default. The context is put back afterwards.

        Raises deferkv.Error when the question does not fit in the context window."""
        _check_max_tokens(max_tokens)
        tokens = self._model._model.tokenize(question, False, False)
        generation = self._model._model.answer_generation(
            self._compressed, tokens, max_tokens, temperature, top_k, top_p, min_p,
            -1 if seed is None else seed)
        try:
            steps = _TextSteps(generation, stop)
            return steps.result("".join(steps))
        finally:
            self._compressed.restore()


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
