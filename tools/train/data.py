"""Training examples: token ids plus the positions whose next token is scored.

Two sources:
* AssociativeRecall: a warm-up that teaches lookup by key (many key -> value pairs, then
  many queries, a loss on every answer digit), built directly from Llama-2 vocabulary ids.
  It is where the retrieval circuit forms cheaply, at a few hundred tokens.
* RulerShards: the JSONL files `deferkv make-data` writes (RULER's own generators, the
  evaluation's templates), a loss on every answer token and the end of sequence, and
  optionally a language-model loss on the prompt's last `prompt_tail` tokens: the
  question and the answer prefix repeat the needle's wording and key, so predicting them
  is copying from earlier in the context, the induction the retrieval builds on.

Positions follow PoSE (Zhu et al., 2023): a sequence of n tokens is cut in two at a random
point and the second part is moved forward by a random skip, so that a model trained on
short sequences sees relative distances and absolute positions up to `position_span`.
"""
import glob
import json
import math
import random
from dataclasses import dataclass, field
from typing import List, Optional

import torch

BOS, EOS = 1, 2
# Llama-2 SentencePiece ids of the digits 0-9, ':' , '.', ',' and the lone space piece.
DIGITS = [29900, 29896, 29906, 29941, 29946, 29945, 29953, 29955, 29947, 29929]
COLON, PERIOD, COMMA, SPACE = 29901, 29889, 29892, 29871
# Word pieces with a leading space ("▁the" ...) occupy most ids below 29871; keys and
# filler are drawn from this range, away from the byte tokens (3-258).
WORD_IDS = (300, 29800)


@dataclass
class Example:
    tokens: List[int]
    targets: List[int]  # the token to predict at each scored position
    scored: List[int]   # indices into tokens (the position whose next token is targets[i])
    # Auxiliary language-model targets (scored apart, not counted in the accuracy).
    aux_targets: List[int] = field(default_factory=list)
    aux_scored: List[int] = field(default_factory=list)
    # Simulated eviction: query rows from `evicted_from` on do not see these key columns.
    evicted_from: int = 0
    evicted: List[int] = field(default_factory=list)


class AssociativeRecall:
    """[BOS] (key filler ':' value '.')*  then  (key filler ':' value '.')* as queries.

    A key is `key_tokens` word ids, a value four digits; the filler between a key and its
    ':' (0 to `max_filler` word ids) varies independently in the facts and the queries,
    so the lookup must match the key itself, not a fixed offset. Random word noise
    separates facts. One-token keys without filler or the ': ' marker ("k d d d d .")
    are the plain induction task the curriculum starts from."""

    def __init__(self, rng: random.Random, length: int, n_facts: int, n_queries: int, key_tokens: int = 2,
                 max_filler: int = 6, marker: bool = True):
        self.rng, self.length, self.n_facts, self.n_queries = rng, length, n_facts, n_queries
        self.key_tokens, self.max_filler = key_tokens, max_filler
        self.marker = [COLON, SPACE] if marker else []

    def _word(self):
        return self.rng.randrange(*WORD_IDS)

    def _filler(self):
        return [self._word() for _ in range(self.rng.randint(0, self.max_filler))]

    def example(self) -> Example:
        rng = self.rng
        keys = set()
        while len(keys) < self.n_facts:
            keys.add(tuple(self._word() for _ in range(self.key_tokens)))
        keys = list(keys)
        values = {k: [rng.choice(DIGITS) for _ in range(4)] for k in keys}
        facts = []
        for k in keys:
            facts.append(list(k) + self._filler() + self.marker + values[k] + [PERIOD])
        tokens = [BOS]
        budget = self.length - self.n_queries * 16
        noise_total = max(0, budget - 1 - sum(len(f) for f in facts))
        cuts = sorted(rng.randint(0, noise_total) for _ in range(len(facts)))
        previous = 0
        for fact, cut in zip(facts, cuts):
            tokens += [self._word() for _ in range(cut - previous)]
            previous = cut
            tokens += fact
        tokens += [self._word() for _ in range(noise_total - previous)]
        targets, scored = [], []
        for k in rng.sample(keys, min(self.n_queries, len(keys))):
            tokens += list(k) + self._filler() + self.marker
            for digit in values[k]:
                scored.append(len(tokens) - 1)
                targets.append(digit)
                tokens.append(digit)
            tokens.append(PERIOD)
        return Example(tokens, targets, scored)


# Tokens too common to mark a needle: the lone space, '.', ',', end of sequence.
NOT_NEEDLE_MARKERS = {SPACE, PERIOD, COMMA, EOS}


@dataclass
class KvDrop:
    """Simulated KV eviction at prefill end, so that the answers stay a function of what
    a press keeps (the needle, the window), not of the haystack around them.

    With probability `prob`, the decode rows of an example (every position after the
    prompt's last token: the first answer token comes from the full prefill, as under
    SnapKV) lose a random share of the prompt's key columns, keeping a fraction drawn
    log-uniformly from [min_keep, max_keep]. Always kept, as a press keeps them: the
    first token (the attention sink), the last `window` prompt tokens (the observation
    window), and the needles, found as the prompt positions whose token occurs in the
    answer, with `needle_before` tokens before them (the needle's key) and one after."""
    prob: float = 0.6
    min_keep: float = 0.005
    max_keep: float = 0.5
    window: int = 32
    needle_before: int = 12

    def evicted_columns(self, rng: random.Random, prompt: List[int], answer: List[int]) -> List[int]:
        if rng.random() >= self.prob:
            return []
        n = len(prompt)
        keep = [False] * n
        keep[0] = True
        for i in range(max(0, n - self.window), n):
            keep[i] = True
        markers = set(answer) - NOT_NEEDLE_MARKERS
        for p, token in enumerate(prompt[: n - self.window]):
            if token in markers:
                for i in range(max(0, p - self.needle_before), min(n, p + 2)):
                    keep[i] = True
        fraction = math.exp(rng.uniform(math.log(self.min_keep), math.log(self.max_keep)))
        return [i for i in range(n) if not keep[i] and rng.random() >= fraction]


class RulerShards:
    """Samples from `deferkv make-data` JSONL files, loaded lazily shard by shard."""

    def __init__(self, rng: random.Random, pattern: str, prompt_tail: int = 0, kv_drop: Optional[KvDrop] = None,
                 worked_example: bool = False):
        self.rng, self.prompt_tail, self.kv_drop = rng, prompt_tail, kv_drop
        self.worked_example = worked_example  # VT rows: train on their worked example alone
        self.paths = sorted(glob.glob(pattern))
        if not self.paths:
            raise SystemExit(f"no training shards match '{pattern}' (run tools/train/make_shards.sh)")
        self.rows = []

    def row(self) -> dict:
        """The next `make-data` row as it stands (lookahead.py reads its prompt and answer)."""
        if not self.rows:
            path = self.rng.choice(self.paths)
            with open(path) as f:
                self.rows = [json.loads(line) for line in f]
            self.rng.shuffle(self.rows)
        return self.rows.pop()

    def example(self) -> Example:
        row = self.row()
        if self.worked_example:
            return vt_worked_example(row)
        return ruler_example(row, self.rng, self.prompt_tail, self.kv_drop)


def ruler_example(row, rng: random.Random, prompt_tail: int = 0, kv_drop: Optional[KvDrop] = None) -> Example:
    """A `make-data` row as an example: every answer token scored, and the prompt's last
    `prompt_tail` tokens as auxiliary targets."""
    prompt, answer = row["tokens"], row["answer_tokens"]
    tokens = prompt + answer[:-1]
    scored = list(range(len(prompt) - 1, len(tokens)))
    aux_scored = list(range(max(0, len(prompt) - 1 - prompt_tail), len(prompt) - 1))
    evicted = kv_drop.evicted_columns(rng, prompt, answer) if kv_drop else []
    return Example(tokens, answer, scored, [tokens[i + 1] for i in aux_scored], aux_scored, len(prompt), evicted)


# Llama-2 ids of "▁they ▁are :", which ends VT's answer prefix, and of the newline byte.
THEY_ARE = [896, 526, 29901]
NEWLINE = 13


def vt_worked_example(row) -> Example:
    """VT's in-context worked example alone, cut from a VT `make-data` row: the prompt up
    to the end of the example's answer ("... they are:  XWW TMH OHP RZP RVT\n"), scored on
    that answer. RULER sizes the example to ~500 tokens with 3-letter names, so each row
    gives a chain lookup at half the 1K length: a denser drill of the same text."""
    if row.get("task") != "vt":
        raise SystemExit(f"a worked_example source needs VT shards, got a {row.get('task')!r} row")
    prompt = row["tokens"]
    # The example's answer prefix, then the question's own: the first of two.
    starts = [i for i in range(len(prompt) - 2) if prompt[i:i + 3] == THEY_ARE]
    if len(starts) < 2:
        raise SystemExit("a VT row without its worked example (fewer than two 'they are:' answer prefixes)")
    begin = starts[0] + len(THEY_ARE)
    end = prompt.index(NEWLINE, begin)
    tokens = prompt[: end + 1]
    scored = list(range(begin - 1, end))
    return Example(tokens, [tokens[i + 1] for i in scored], scored)


def pose_positions(rng: random.Random, n: int, span: int) -> List[int]:
    """0..n-1 with a random skip inserted at a random cut (no skip when span <= n)."""
    if span <= n:
        return list(range(n))
    cut = rng.randint(1, n - 1)
    skip = rng.randint(0, span - n)
    return list(range(cut)) + list(range(cut + skip, n + skip))


def eviction_mask(examples: List[Example], n: int) -> Optional[torch.Tensor]:
    """Additive attention mask [batch, 1, n, n] with -inf where an example's decode rows
    lose an evicted column; None when no example of the batch evicts anything."""
    if not any(e.evicted for e in examples):
        return None
    mask = torch.zeros(len(examples), 1, n, n)
    for b, e in enumerate(examples):
        if e.evicted:
            mask[b, 0, e.evicted_from:, torch.tensor(e.evicted)] = float("-inf")
    return mask


def collate(examples: List[Example], rng: random.Random, position_span: int):
    """Right-padded batch: tokens, positions, (batch, seq) indices of the scored positions
    and their targets, the same three for the auxiliary targets, then the eviction mask
    (or None)."""
    n = max(len(e.tokens) for e in examples)
    tokens = torch.zeros(len(examples), n, dtype=torch.long)
    positions = torch.zeros(len(examples), n, dtype=torch.long)
    b_index, s_index, targets = [], [], []
    aux_b, aux_s, aux_t = [], [], []
    for b, e in enumerate(examples):
        tokens[b, : len(e.tokens)] = torch.tensor(e.tokens)
        pos = pose_positions(rng, len(e.tokens), position_span)
        pos += list(range(pos[-1] + 1, pos[-1] + 1 + n - len(pos)))  # padding continues
        positions[b] = torch.tensor(pos)
        b_index += [b] * len(e.scored)
        s_index += e.scored
        targets += e.targets
        aux_b += [b] * len(e.aux_scored)
        aux_s += e.aux_scored
        aux_t += e.aux_targets
    index = lambda values: torch.tensor(values, dtype=torch.long)
    return (tokens, positions, index(b_index), index(s_index), index(targets),
            index(aux_b), index(aux_s), index(aux_t), eviction_mask(examples, n))
