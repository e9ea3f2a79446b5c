"""Trains LookaheadKV's parts for a model (arXiv 2603.10899; docs/methods/lookaheadkv.md)
and writes the weights file `--press lookaheadkv:weights=FILE` reads
(docs/lookaheadkv_weights.md):

    python3 tools/train/lookahead.py --run /work/train-runs/la1 --recipe tools/train/recipe-lookahead.json
    python3 tools/train/lookahead.py --run /work/train-runs/la1 --export /tmp/la1.lookaheadkv.gguf

The base model (a `llama` GGUF, read by gguf_weights.py) is frozen. What trains is what
the file holds: `n_lookahead` input embeddings, fed after the prompt at positions T, T+1,
..., and per layer a LoRA delta (alpha / r) B A x for each target projection, added at
those rows only. The loss, per layer and KV head, compares two distributions over the
prompt, each reduced exactly as the engine's `lookaheadkv` reduces the rows' attention
(src/press/methods/lookaheadkv/lookahead_attention.cpp): every query's softmax over the
prompt entries only, then the mean over the queries and over the KV head's query heads:

* the rows' (the student), and
* the answer's (the teacher): the queries of the answer tokens fed after the prompt, i.e.
  the decode steps that read the cache once it has been evicted.

KL(teacher || rows), on the prompt entries before the last `window` (renormalised), mean
over layers and heads. As train.py, a run folder holds checkpoint.pt (the same command
resumes), log.jsonl and the recipe it started with.

[OUR FORMULATION] choices (the paper trains on its model's own responses with a KL loss;
the rest is ours):
* Teacher `gold` (the recipe's default): the answer `make-data` gives, teacher-forced,
  not the model's greedy answer (`greedy`, also here). Where the model answers right
  (0.97-0.99 of the answer tokens at 4K, tools/train/README.md) the two are the same
  tokens; where it errs, the gold answer's attention is on the needle the evaluation
  scores, the greedy one's often on a distractor, which the rows should not learn to keep.
* The loss leaves out the last `window` prompt entries: the press keeps them whatever the
  scores say, and the answer's attention on the question at the prompt's end would
  otherwise dominate the distribution that decides which older entries stay.
* The deltas start at zero (B = 0, as PEFT), so the untrained rows are the base model on
  their embeddings, which start as random vectors of the token embeddings' scale.
"""
import argparse
import json
import math
import os
import random
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from data import EOS, RulerShards
from gguf_weights import ARRAY, F32, STRING, U32, load_model, read_gguf, write_gguf
from model import Llama, apply_rope, rope_tables
from train import learning_rate, open_run, save_checkpoint

# The file's target names (docs/lookaheadkv_weights.md) and the trainer's modules they are.
PROJECTIONS = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
               "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}


class LookaheadParts(nn.Module):
    """The trained parts: embeddings [n_lookahead, n_embd], and per layer and target
    lora_a [rank, in] and lora_b [out, rank] (the file's tensors in PyTorch's layout)."""

    def __init__(self, model: Llama, n_lookahead: int, rank: int, alpha: float, targets):
        super().__init__()
        unknown = [t for t in targets if t not in PROJECTIONS]
        if unknown or len(set(targets)) != len(targets):
            raise SystemExit(f"lookahead targets {targets}: each of {', '.join(PROJECTIONS)} at most once")
        if n_lookahead < 1 or rank < 1:
            raise SystemExit(f"n_lookahead ({n_lookahead}) and lora_rank ({rank}) must be positive")
        self.rank, self.alpha, self.targets = rank, float(alpha), list(targets)
        scale = model.token_embd.weight.std().item()
        self.embeddings = nn.Parameter(torch.randn(n_lookahead, model.cfg.n_embd) * scale)
        self.lora_a, self.lora_b = nn.ParameterDict(), nn.ParameterDict()
        for layer, block in enumerate(model.blocks):
            for target in self.targets:
                out, width = getattr(block, PROJECTIONS[target]).weight.shape
                self.lora_a[self.key(layer, target)] = nn.Parameter(torch.randn(rank, width) / math.sqrt(width))
                self.lora_b[self.key(layer, target)] = nn.Parameter(torch.zeros(out, rank))

    @staticmethod
    def key(layer: int, target: str) -> str:
        return f"blk{layer}_{target}"  # ParameterDict keys may not hold a "."

    def delta(self, layer: int, target: str, x: torch.Tensor):
        """(alpha / r) B A x for the rows x, or None when the target has no delta."""
        if target not in self.targets:
            return None
        key = self.key(layer, target)
        return (self.alpha / self.rank) * (x @ self.lora_a[key].T) @ self.lora_b[key].T


def layer_step(model: Llama, layer: int, x, cos, sin, past_k, past_v, parts=None):
    """One layer over new rows x [m, n_embd] (RoPE angles cos, sin [m, head_dim/2]), which
    attend to the cached keys and values (past_k, past_v [n_head_kv, P, head_dim], RoPE
    applied) and causally to each other, as the engine's forward pass does; `parts` adds
    the lookahead deltas at these rows. Returns (x, queries [n_head, m, head_dim], keys
    and values of the rows [n_head_kv, m, head_dim])."""
    block, cfg = model.blocks[layer], model.cfg
    m, hd = x.shape[0], cfg.head_dim

    def project(target, inp):
        y = getattr(block, PROJECTIONS[target])(inp)
        d = parts.delta(layer, target, inp) if parts is not None else None
        return y if d is None else y + d

    h = block.attn_norm(x)
    q = project("q", h).view(m, cfg.n_head, hd).transpose(0, 1)
    k = project("k", h).view(m, cfg.n_head_kv, hd).transpose(0, 1)
    v = project("v", h).view(m, cfg.n_head_kv, hd).transpose(0, 1)
    q, k = apply_rope(q[None], cos[None], sin[None])[0], apply_rope(k[None], cos[None], sin[None])[0]
    keys, values = torch.cat([past_k, k], 1), torch.cat([past_v, v], 1)
    group = cfg.n_head // cfg.n_head_kv
    scores = q @ keys.repeat_interleave(group, 0).transpose(-1, -2) / math.sqrt(hd)
    mask = torch.zeros(m, keys.shape[1])
    mask[:, past_k.shape[1]:] = torch.full((m, m), float("-inf")).triu(1)
    attended = torch.softmax(scores + mask, -1) @ values.repeat_interleave(group, 0)
    x = x + project("o", attended.transpose(0, 1).reshape(m, -1))
    h = block.ffn_norm(x)
    x = x + project("down", F.silu(project("gate", h)) * project("up", h))
    return x, q, k, v


def observed_attention(q, prompt_k, n_head_kv):
    """The engine's reduction of queries' attention on the prompt: each query head's
    softmax over the prompt keys only, mean over the queries, then over each KV head's
    group of query heads. q [n_head, m, head_dim], prompt_k [n_head_kv, T, head_dim]
    -> [n_head_kv, T]."""
    n_head, _, hd = q.shape
    group = n_head // n_head_kv
    logits = q @ prompt_k.repeat_interleave(group, 0).transpose(-1, -2) / math.sqrt(hd)
    return torch.softmax(logits, -1).mean(1).view(n_head_kv, group, -1).mean(1)


PROMPT_CHUNK = 512  # prompt rows per attention block in prompt_pass


def empty_cache(cfg):
    return torch.zeros(cfg.n_head_kv, 0, cfg.head_dim), torch.zeros(cfg.n_head_kv, 0, cfg.head_dim)


def rope(cfg, first, n):
    cos, sin = rope_tables(torch.arange(first, first + n)[None], cfg.head_dim, cfg.rope_base)
    return cos[0], sin[0]


@dataclass
class PromptPass:
    keys: list          # per layer [n_head_kv, T, head_dim], RoPE applied
    values: list        # per layer [n_head_kv, T, head_dim]
    tail_queries: list  # per layer [n_head, window, head_dim]: the last `window` prompt queries
    teacher: torch.Tensor  # [n_layer, n_head_kv, T]; None when no answer token is fed


@torch.no_grad()
def prompt_pass(model: Llama, prompt, answer, teacher: str, window: int, max_answer: int) -> PromptPass:
    """The frozen model over the prompt (positions 0..T-1), then the answer fed after it:
    the gold answer's tokens but its last (end of sequence, never fed), or the model's
    greedy answer up to its end of sequence or max_answer tokens. The teacher is the fed
    answer tokens' attention on the prompt, reduced as observed_attention does."""
    cfg = model.cfg
    x = model.token_embd(torch.tensor(prompt))
    cos, sin = rope(cfg, 0, len(prompt))
    keys, values, tail = [], [], []
    for layer in range(cfg.n_layer):
        # In chunks of PROMPT_CHUNK rows, each attending to the keys before it and its own:
        # the causal half of the attention only, and [chunk x T] scores rather than [T x T].
        k, v = empty_cache(cfg)
        rows, queries = [], []
        for begin in range(0, len(prompt), PROMPT_CHUNK):
            end = begin + PROMPT_CHUNK
            out, q, k_new, v_new = layer_step(model, layer, x[begin:end], cos[begin:end], sin[begin:end], k, v)
            k, v = torch.cat([k, k_new], 1), torch.cat([v, v_new], 1)
            rows.append(out)
            queries.append(q[:, -window:])
        x = torch.cat(rows)
        keys.append(k)
        values.append(v)
        tail.append(torch.cat(queries, 1)[:, -window:])
    if teacher == "gold":
        fed = list(answer[:-1])
    elif teacher == "greedy":
        first = int(next_token_logits(model, x).argmax())
        fed = [first] if first != EOS else []
    else:
        raise SystemExit(f"teacher {teacher!r}: gold or greedy")
    past_k, past_v = list(keys), list(values)
    seen = [[] for _ in range(cfg.n_layer)]  # per layer, the fed tokens' queries
    position, pending = len(prompt), list(fed)
    while pending:  # gold: every token at once; greedy: one at a time, each the last step's argmax
        batch, pending = pending, []
        x = model.token_embd(torch.tensor(batch))
        cos, sin = rope(cfg, position, len(batch))
        for layer in range(cfg.n_layer):
            x, q, k, v = layer_step(model, layer, x, cos, sin, past_k[layer], past_v[layer])
            past_k[layer], past_v[layer] = torch.cat([past_k[layer], k], 1), torch.cat([past_v[layer], v], 1)
            seen[layer].append(q)
        position += len(batch)
        if teacher == "greedy":
            token = int(next_token_logits(model, x).argmax())
            if token != EOS and len(fed) < max_answer:
                fed.append(token)
                pending = [token]
    target = None
    if fed:  # an answer of its end alone reads nothing of the evicted cache
        target = torch.stack([observed_attention(torch.cat(seen[layer], 1), keys[layer], cfg.n_head_kv)
                              for layer in range(cfg.n_layer)])
    return PromptPass(keys, values, tail, target)


def next_token_logits(model: Llama, x):
    return model.output_norm(x[-1]) @ model.token_embd.weight.T


def rows_attention(model: Llama, parts: LookaheadParts, keys, values):
    """The lookahead rows after the prompt whose keys and values are given (the deltas at
    the rows): their attention on the prompt [n_layer, n_head_kv, T], as the engine's
    LookaheadAttention reduces it (mean over the rows)."""
    cfg = model.cfg
    t = keys[0].shape[1]
    x = parts.embeddings
    cos, sin = rope(cfg, t, x.shape[0])
    observed = []
    for layer in range(cfg.n_layer):
        x, q, _, _ = layer_step(model, layer, x, cos, sin, keys[layer], values[layer], parts)
        observed.append(observed_attention(q, keys[layer], cfg.n_head_kv))
    return torch.stack(observed)


def kl_before_window(teacher, student, window: int):
    """Mean over layers and KV heads of KL(teacher || student), both renormalised over the
    prompt entries before the last `window` (the candidates the press chooses among)."""
    n = teacher.shape[-1] - window  # the student may hold just these n
    if n < 1:
        raise SystemExit(f"a prompt of {teacher.shape[-1]} tokens has no entry before the {window}-token window")
    p = teacher[..., :n] / teacher[..., :n].sum(-1, keepdim=True)
    log_q = torch.log(student[..., :n].clamp_min(1e-30)) - torch.log(student[..., :n].sum(-1, keepdim=True))
    return (torch.xlogy(p, p) - p * log_q).sum(-1).mean()


def kept_mass(teacher, student, window: int, keep: int, kernel: int = 7):
    """The share of the teacher (renormalised over the candidates) on the `keep` candidates
    whose max-pooled student scores are highest, mean over layers and KV heads: what a press
    choosing by the student keeps of what the answer reads, at a budget of keep + window
    entries per head (lookaheadkv's default pooling, max over 7)."""
    n = teacher.shape[-1] - window
    p = teacher[..., :n] / teacher[..., :n].sum(-1, keepdim=True)
    pooled = F.max_pool1d(student[..., :n].reshape(-1, 1, n), kernel, 1, kernel // 2).reshape(p.shape)
    return p.gather(-1, pooled.topk(min(keep, n), -1).indices).sum(-1).mean().item()


def example_loss(model, parts, row, loss_spec, keep=0):
    """(loss, measures) of one `make-data` row, (None, None) when its answer reads nothing.
    With `keep` (evaluations), the measures hold the rows' kept_mass and, for reference,
    the KL and kept_mass of SnapKV's observers (the last `window` prompt queries) as the
    student, what the rows have to beat, and the teacher's own kept_mass, the ceiling."""
    window = loss_spec.get("window", 32)
    p = prompt_pass(model, row["tokens"], row["answer_tokens"], loss_spec.get("teacher", "gold"), window,
                    loss_spec.get("max_answer", 64))
    if p.teacher is None:
        return None, None
    rows = rows_attention(model, parts, p.keys, p.values)
    loss = kl_before_window(p.teacher, rows, window)
    if not keep:
        return loss, None
    # The window queries see only the prompt's keys before them: the candidates, here.
    n_kv = model.cfg.n_head_kv
    n = len(row["tokens"]) - window
    snap = torch.stack([observed_attention(q, k[:, :n], n_kv) for q, k in zip(p.tail_queries, p.keys)])
    return loss, {"kept": kept_mass(p.teacher, rows.detach(), window, keep),
                  "window_kl": kl_before_window(p.teacher, snap, window).item(),
                  "window_kept": kept_mass(p.teacher, snap, window, keep),
                  "answer_kept": kept_mass(p.teacher, p.teacher, window, keep)}


class Prompts:
    """make-data rows from the recipe's sources, mixed by weight."""

    def __init__(self, sources, rng):
        self.rng = rng
        folder = os.environ.get("TRAIN_DATA", "/work/train-data")
        self.shards = [RulerShards(rng, s["shards"].replace("${TRAIN_DATA}", folder)) for s in sources]
        self.weights = [s.get("weight", 1.0) for s in sources]

    def row(self):
        return self.rng.choices(self.shards, self.weights)[0].row()


def evaluate(model, parts, recipe):
    """On the recipe's fixed evaluation rows, the means of the loss, of the rows' kept_mass
    and of the window's KL and kept_mass (example_loss)."""
    spec = recipe.get("eval")
    if not spec:
        return None
    prompts = Prompts(spec["sources"], random.Random(12345))
    losses, measures = [], []
    with torch.no_grad():
        for _ in range(spec["examples"]):
            loss, measured = example_loss(model, parts, prompts.row(), recipe["loss"], spec.get("keep", 32))
            if loss is not None:
                losses.append(loss.item())
                measures.append(measured)
    out = {"loss": float(np.mean(losses))}
    out.update({key: float(np.mean([m[key] for m in measures])) for key in measures[0]})
    return {key: round(value, 4) for key, value in out.items()}


def write_lookahead_weights(path, parts: LookaheadParts, model: Llama):
    """The weights file (docs/lookaheadkv_weights.md), read back and compared as a check."""
    cfg = model.cfg
    metadata = [("general.architecture", STRING, "lookaheadkv"), ("lookaheadkv.format_version", U32, 1),
                ("lookaheadkv.base.architecture", STRING, "llama"), ("lookaheadkv.base.n_embd", U32, cfg.n_embd),
                ("lookaheadkv.base.n_layer", U32, cfg.n_layer),
                ("lookaheadkv.n_lookahead", U32, parts.embeddings.shape[0]),
                ("lookaheadkv.lora_rank", U32, parts.rank), ("lookaheadkv.lora_alpha", F32, parts.alpha),
                ("lookaheadkv.targets", (ARRAY, STRING), parts.targets)]
    tensors = [("lookahead.embeddings", parts.embeddings)]
    for layer in range(cfg.n_layer):
        for target in parts.targets:
            key = parts.key(layer, target)
            tensors += [(f"blk.{layer}.{target}.lora_a", parts.lora_a[key]),
                        (f"blk.{layer}.{target}.lora_b", parts.lora_b[key])]
    arrays = [(name, t.detach().to(torch.float32).numpy()) for name, t in tensors]
    write_gguf(path, metadata, arrays)
    _, written = read_gguf(path)
    for name, array in arrays:
        if not np.array_equal(written[name], array):
            raise SystemExit(f"{path}: tensor {name} did not read back as written")


def load_base(path):
    model = load_model(path)
    model.requires_grad_(False)
    model.eval()
    return model


def new_parts(model, recipe):
    spec = recipe["lookahead"]
    return LookaheadParts(model, spec["n_lookahead"], spec["lora_rank"], spec["lora_alpha"], spec["targets"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="run folder (checkpoint, log), outside git")
    parser.add_argument("--recipe", help="recipe JSON (required for a new run)")
    parser.add_argument("--minutes", type=float, default=0, help="stop after this much training time (0: no limit)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the machine is shared)")
    parser.add_argument("--export", metavar="FILE.gguf", help="write the run's weights file and stop")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    recipe, checkpoint_path = open_run(args.run, args.recipe)

    torch.manual_seed(recipe["seed"])
    model = load_base(recipe["base_model"])
    parts = new_parts(model, recipe)
    optimizer = torch.optim.AdamW(parts.parameters(), lr=recipe["lr"], betas=(0.9, 0.95),
                                  weight_decay=recipe["weight_decay"])
    state = {"step": 0, "train_seconds": 0.0}
    if os.path.exists(checkpoint_path):
        saved = torch.load(checkpoint_path)
        parts.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        print(f"resumed at step {state['step']} ({state['train_seconds'] / 60:.1f} min trained)")
    if args.export:
        write_lookahead_weights(args.export, parts, model)
        print(f"wrote {args.export} (step {state['step']})")
        return
    print(f"lookahead parts: {sum(p.numel() for p in parts.parameters())} parameters on {recipe['base_model']}")

    log = open(os.path.join(args.run, "log.jsonl"), "a")
    session_start = time.time()
    # A fresh stream per resumed step count, as train.py: a resumed run draws other rows.
    prompts = Prompts(recipe["sources"], random.Random(recipe["seed"] * 1000003 + state["step"]))
    if state["step"] == 0:  # the untrained rows' loss: where the curve starts
        entry = {"step": 0, "eval": evaluate(model, parts, recipe)}
        print(json.dumps(entry), flush=True)
        log.write(json.dumps(entry) + "\n")
    while state["step"] < recipe["steps"]:
        if args.minutes and time.time() - session_start > args.minutes * 60:
            save_checkpoint(checkpoint_path, parts, optimizer, state)
            print("time limit reached; checkpoint saved")
            return
        started = time.time()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(recipe, recipe, state["step"], state["step"])
        optimizer.zero_grad(set_to_none=True)
        losses = []
        while len(losses) < recipe["batch"]:  # one row at a time: prompts differ in length
            loss, _ = example_loss(model, parts, prompts.row(), recipe["loss"])
            if loss is None:
                continue
            (loss / recipe["batch"]).backward()
            losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_(parts.parameters(), 1.0)
        optimizer.step()
        state["step"] += 1
        state["train_seconds"] += time.time() - started
        entry = {"step": state["step"], "loss": round(float(np.mean(losses)), 4),
                 "minutes": round(state["train_seconds"] / 60, 2)}
        if state["step"] % recipe["eval_every"] == 0 or state["step"] == recipe["steps"]:
            entry["eval"] = evaluate(model, parts, recipe)
            save_checkpoint(checkpoint_path, parts, optimizer, state)
        if state["step"] % recipe["log_every"] == 0 or "eval" in entry:
            print(json.dumps(entry), flush=True)
            log.write(json.dumps(entry) + "\n")
            log.flush()
    print("done")


if __name__ == "__main__":
    main()
