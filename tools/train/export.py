"""Writes a run's checkpoint as a safetensors file with GGUF tensor names, which
`deferkv import-weights` turns into a GGUF model:

    python3 tools/train/export.py --run /work/train-runs/r1 -o /tmp/model.safetensors
    build/deferkv import-weights --weights /tmp/model.safetensors \
        --vocab tests/data/vocab/ggml-vocab-llama-spm.gguf --type f16 -o models/model.gguf

The header's __metadata__ holds the hyperparameters as strings (architecture, n_vocab,
n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx, rope_base, rms_eps) plus name and
description. Tensors are F32 in PyTorch's layout ([out, in] for a linear layer).
"""
import argparse
import json
import os
import struct

import torch

from model import Llama, ModelConfig


def gguf_names(model: Llama):
    """(GGUF name, tensor) for every parameter."""
    yield "token_embd.weight", model.token_embd.weight
    yield "output_norm.weight", model.output_norm.weight
    for i, block in enumerate(model.blocks):
        for part in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                     "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"):
            yield f"blk.{i}.{part}.weight", getattr(block, part).weight


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, tensor in tensors:
        data = tensor.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format pads the header to 8 bytes
    partial = path + ".partial"
    with open(partial, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for blob in blobs:
            f.write(blob)
    os.replace(partial, path)


def read_safetensors(path):
    """(metadata, {name: float32 tensor}) of an F32 file write_safetensors wrote."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + size])
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: tensor {name} is {info['dtype']}; this reader knows F32")
        begin, end = info["data_offsets"]
        values = torch.frombuffer(bytearray(data[8 + size + begin:8 + size + end]), dtype=torch.float32)
        tensors[name] = values.reshape(info["shape"])
    return metadata, tensors


def load_exported(path) -> Llama:
    """A model write_safetensors wrote (as main() or make_export_fixture.py export one)."""
    metadata, tensors = read_safetensors(path)
    fields = ModelConfig().to_dict()
    cfg = ModelConfig(**{key: type(value)(metadata[key]) for key, value in fields.items()})
    model = Llama(cfg)
    with torch.no_grad():
        for name, parameter in gguf_names(model):
            parameter.copy_(tensors[name])
    return model


def load_run(run: str):
    """A run folder's latest checkpoint: (model, recipe, training state)."""
    recipe = json.load(open(os.path.join(run, "recipe.json")))
    saved = torch.load(os.path.join(run, "checkpoint.pt"))
    state = saved["state"]
    cfg = ModelConfig(**recipe["model"])
    cfg.rope_base = state.get("rope_base", cfg.rope_base)  # a stage may have raised it
    model = Llama(cfg)
    model.load_state_dict(saved["model"])
    return model, recipe, state


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="run folder with checkpoint.pt and recipe.json")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--name", default="deferkv-retrieval")
    args = parser.parse_args()

    model, recipe, state = load_run(args.run)
    cfg = model.cfg
    metadata = {key: str(value) for key, value in cfg.to_dict().items()}
    metadata.update(architecture="llama", name=args.name,
                    description=f"trained by tools/train (recipe seed {recipe['seed']}, step {state['step']}, "
                                f"{state['train_seconds'] / 60:.0f} min)")
    write_safetensors(args.output, gguf_names(model), metadata)
    print(f"wrote {args.output} (step {state['step']})")


if __name__ == "__main__":
    main()
