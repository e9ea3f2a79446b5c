"""Writes the LookaheadKV fixture of tests/press/lookaheadkv_test.cpp: rows and deltas
for the tiny exported model of make_export_fixture.py (tests/data/train/tiny.safetensors),
trained by lookahead.py's own loss for a few steps and written by its export
(tiny_lookahead.gguf), and the rows' attention PyTorch computes on one prompt, per layer
and KV head (tiny_lookahead_attention.json). The test runs the rows in the engine and
compares, so the trainer's forward (where the deltas apply, RoPE at T, T+1, ..., the
softmax over the prompt, the reductions) and the engine's agree.

    python3 tools/train/make_lookahead_fixture.py tests/data/train
"""
import json
import os
import random
import sys

import torch

from export import load_exported
from lookahead import LookaheadParts, example_loss, rows_attention, prompt_pass, write_lookahead_weights

EOS = 2


def main():
    out = sys.argv[1]
    torch.manual_seed(11)
    model = load_exported(os.path.join(out, "tiny.safetensors"))
    model.requires_grad_(False)
    parts = LookaheadParts(model, n_lookahead=3, rank=2, alpha=4.0, targets=list(("q", "k", "v", "o", "gate", "up",
                                                                                   "down")))
    with torch.no_grad():  # B away from zero, so that every delta moves the rows' attention
        for b in parts.lora_b.values():
            b.copy_(torch.randn_like(b) * 0.5)
    # A few steps of the trainer's loss on random prompts and answers: the file is what
    # training writes, not hand-made values.
    rng = random.Random(5)
    optimizer = torch.optim.Adam(parts.parameters(), lr=1e-2)
    loss_spec = {"teacher": "gold", "window": 4}
    for step in range(3):
        optimizer.zero_grad()
        row = {"tokens": [1] + [rng.randrange(3, 512) for _ in range(30)],
               "answer_tokens": [rng.randrange(3, 512) for _ in range(4)] + [EOS]}
        loss, _ = example_loss(model, parts, row, loss_spec)
        loss.backward()
        optimizer.step()
        print(f"step {step + 1}: loss {loss.item():.4f}")
    write_lookahead_weights(os.path.join(out, "tiny_lookahead.gguf"), parts, model)

    prompt = [1, 400, 17, 260, 300, 45, 99, 511, 3, 250, 128, 77, 66, 301, 302, 88, 19, 204, 5, 410]
    with torch.no_grad():
        p = prompt_pass(model, prompt, [EOS], "gold", 4, 0)
        attention = rows_attention(model, parts, p.keys, p.values)
        # The deltas must matter to the fixture, or the test could not see them dropped.
        targets, parts.targets = parts.targets, []
        without = rows_attention(model, parts, p.keys, p.values)
        parts.targets = targets
    change = ((attention - without).abs() / attention).max().item()
    print(f"largest relative change of the rows' attention without the deltas: {change:.3f}")
    json.dump({"prompt": prompt, "attention": [[[float(f"{v:.9g}") for v in head] for head in layer]
                                               for layer in attention.tolist()]},
              open(os.path.join(out, "tiny_lookahead_attention.json"), "w"))
    print(f"wrote {out}/tiny_lookahead.gguf and tiny_lookahead_attention.json")


if __name__ == "__main__":
    main()
