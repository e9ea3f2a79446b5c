"""A llama-architecture decoder (RMSNorm, RoPE, GQA, SwiGLU) laid out exactly as our
engine reads a GGUF "llama" model, so that its weights export without any permutation:

* RoPE rotates adjacent pairs (x[2i], x[2i+1]) by pos * base^(-2i/head_dim), as
  llama.cpp's "normal" rope for the llama architecture does.
* Query head h reads KV head h // (n_head / n_head_kv) (contiguous groups).
* The output projection is tied to the token embeddings (no output.weight).
* Linear weights are [out, in], which is ggml's ne = [in, out]: a row per output.
"""
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    n_vocab: int = 32000
    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 8
    n_head_kv: int = 2
    n_ff: int = 512
    n_ctx: int = 8192  # written to the GGUF as the training context
    rope_base: float = 10000.0
    rms_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(positions: torch.Tensor, head_dim: int, base: float):
    """cos and sin of each adjacent pair's angle: [batch, seq, head_dim/2]."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = positions.to(torch.float32)[..., None] * inv_freq
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """x: [batch, heads, seq, head_dim]; rotates (x[2i], x[2i+1])."""
    even, odd = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None], sin[:, None]
    return torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d, hd = cfg.n_embd, cfg.head_dim
        self.cfg = cfg
        self.attn_norm = RMSNorm(d, cfg.rms_eps)
        self.attn_q = nn.Linear(d, cfg.n_head * hd, bias=False)
        self.attn_k = nn.Linear(d, cfg.n_head_kv * hd, bias=False)
        self.attn_v = nn.Linear(d, cfg.n_head_kv * hd, bias=False)
        self.attn_output = nn.Linear(cfg.n_head * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, cfg.rms_eps)
        self.ffn_gate = nn.Linear(d, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(d, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, d, bias=False)

    def forward(self, x, cos, sin, mask):
        cfg = self.cfg
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.attn_q(h).view(b, t, cfg.n_head, cfg.head_dim).transpose(1, 2)
        k = self.attn_k(h).view(b, t, cfg.n_head_kv, cfg.head_dim).transpose(1, 2)
        v = self.attn_v(h).view(b, t, cfg.n_head_kv, cfg.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        group = cfg.n_head // cfg.n_head_kv
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(cfg.head_dim) + mask
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.attn_output(attn.transpose(1, 2).reshape(b, t, -1))
        h = self.ffn_norm(x)
        return x + self.ffn_down(F.silu(self.ffn_gate(h)) * self.ffn_up(h))


class Llama(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(cfg.n_vocab, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.output_norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.reset_parameters()

    def reset_parameters(self):
        # GPT-2 style: N(0, 0.02), residual projections scaled down by depth.
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if name.endswith("attn_output.weight") or name.endswith("ffn_down.weight"):
                    std /= math.sqrt(2 * self.cfg.n_layer)
                nn.init.normal_(p, 0.0, std)

    def hidden(self, tokens: torch.Tensor, positions: torch.Tensor, extra_mask=None) -> torch.Tensor:
        """Final normed hidden states [batch, seq, n_embd] (causal attention; `extra_mask`,
        additive [batch, 1, seq, seq], hides more keys, e.g. a simulated eviction)."""
        t = tokens.shape[1]
        cos, sin = rope_tables(positions, self.cfg.head_dim, self.cfg.rope_base)
        mask = torch.full((t, t), float("-inf")).triu(1)
        if extra_mask is not None:
            mask = mask + extra_mask
        x = self.token_embd(tokens)
        for block in self.blocks:
            x = block(x, cos, sin, mask)
        return self.output_norm(x)

    def logits_at(self, hidden: torch.Tensor, batch_index: torch.Tensor, seq_index: torch.Tensor):
        """Logits of the chosen positions only (the tied output projection is the costly part)."""
        return hidden[batch_index, seq_index] @ self.token_embd.weight.T
