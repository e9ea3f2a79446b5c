"""Writes the fixture of tests/model/weights_import_test.cpp: a tiny randomly initialised
model of tools/train/model.py (the 512-token vocabulary of models/stories260K.gguf),
exported as export.py exports a run, and the logits PyTorch computes for a token
sequence. The test imports the weights and checks our engine's logits against these, so
the trainer's layout (RoPE pairs, GQA groups, tied output) and the engine's agree.

    python3 tools/train/make_export_fixture.py tests/data/train
"""
import json
import os
import sys

import torch

from export import gguf_names, write_safetensors
from model import Llama, ModelConfig


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(7)
    cfg = ModelConfig(n_vocab=512, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=96, n_ctx=256)
    model = Llama(cfg)
    with torch.no_grad():  # larger than the training init, so every part matters to the logits
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() == 2 else 0.2) + (1.0 if p.dim() == 1 else 0.0))
    metadata = {key: str(value) for key, value in cfg.to_dict().items()}
    metadata.update(architecture="llama", name="export-fixture", description="tools/train/make_export_fixture.py")
    write_safetensors(os.path.join(out, "tiny.safetensors"), gguf_names(model), metadata)

    tokens = [1, 400, 17, 260, 300, 45, 99, 511, 3, 250, 128, 77, 66, 301, 302, 2]
    with torch.no_grad():
        t = torch.tensor([tokens])
        hidden = model.hidden(t, torch.arange(len(tokens))[None])
        logits = hidden[0] @ model.token_embd.weight.T
    json.dump({"tokens": tokens, "logits": [[round(v, 6) for v in row] for row in logits.tolist()]},
              open(os.path.join(out, "tiny_logits.json"), "w"))
    print(f"wrote {out}/tiny.safetensors and tiny_logits.json")


if __name__ == "__main__":
    main()
