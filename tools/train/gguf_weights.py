"""Reads a `llama` GGUF model (F32, F16 or Q8_0 tensors) back into the trainer's Llama,
so that a run can start from a shipped model (train.py --init-from): the model in
models/ is then the checkpoint, and a new session needs no run folder from an old one.
`write_gguf` writes the other way, F32 tensors with typed metadata: LookaheadKV's
weights file (lookahead.py), which the engine reads directly.

Only what the trainer's architecture has is read: the hyperparameters of model.ModelConfig
and the tensors export.gguf_names lists. The format (GGUF v2/v3): magic "GGUF", version,
tensor and metadata counts, typed key/value pairs, tensor infos (name, dims with the
innermost first, ggml type, offset), then the data from the next `general.alignment`
boundary.
"""
import os
import struct

import numpy as np
import torch

from export import gguf_names
from model import Llama, ModelConfig

# ggml type ids this reader decodes.
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
Q8_0_BLOCK = 32  # values per Q8_0 block: an F16 scale, then 32 int8

# GGUF metadata value types: struct format of the scalar ones.
SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
U32, F32 = 4, 6
ALIGNMENT = 32  # GGUF's default, when general.alignment is not written


class GgufError(Exception):
    pass


class _Reader:
    def __init__(self, data: bytes, path: str):
        self.data, self.pos, self.path = data, 0, path

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise GgufError(f"{self.path}: truncated at byte {self.pos}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        n = self.take("<Q")
        if self.pos + n > len(self.data):
            raise GgufError(f"{self.path}: truncated string at byte {self.pos}")
        value = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return value

    def value(self, kind: int):
        if kind in SCALAR_FORMATS:
            return self.take(SCALAR_FORMATS[kind])
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            item_kind, n = self.take("<I"), self.take("<Q")
            return [self.value(item_kind) for _ in range(n)]
        raise GgufError(f"{self.path}: unknown metadata value type {kind} at byte {self.pos}")


def read_gguf(path: str):
    """(metadata dict, {tensor name: float32 numpy array in PyTorch's layout})."""
    with open(path, "rb") as f:
        data = f.read()
    r = _Reader(data, path)
    if data[:4] != b"GGUF":
        raise GgufError(f"{path}: not a GGUF file (magic {data[:4]!r})")
    r.pos = 4
    version = r.take("<I")
    if version not in (2, 3):
        raise GgufError(f"{path}: GGUF version {version} (this reader knows 2 and 3)")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    metadata = {}
    for _ in range(n_kv):
        key = r.string()
        metadata[key] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        infos.append((name, dims, r.take("<I"), r.take("<Q")))
    alignment = metadata.get("general.alignment", 32)
    base = -(-r.pos // alignment) * alignment
    q8_0 = np.dtype([("d", "<f2"), ("q", "i1", Q8_0_BLOCK)])
    tensors = {}
    for name, dims, kind, offset in infos:
        count = int(np.prod(dims))
        if kind == GGML_Q8_0 and count % Q8_0_BLOCK:
            raise GgufError(f"{path}: Q8_0 tensor {name} has {count} values, not a multiple of {Q8_0_BLOCK}")
        element, items = {GGML_F32: (np.dtype("<f4"), count), GGML_F16: (np.dtype("<f2"), count),
                          GGML_Q8_0: (q8_0, count // Q8_0_BLOCK)}.get(kind, (None, 0))
        if element is None:
            raise GgufError(f"{path}: tensor {name} has ggml type {kind} (this reader knows F32, F16, Q8_0)")
        start = base + offset
        if start + items * element.itemsize > len(data):
            raise GgufError(f"{path}: tensor {name} runs past the end of the file (truncated?)")
        raw = np.frombuffer(data, element, items, start)
        if kind == GGML_Q8_0:
            values = (raw["d"].astype(np.float32)[:, None] * raw["q"].astype(np.float32)).reshape(-1)
        else:
            values = raw.astype(np.float32)
        tensors[name] = values.reshape(list(reversed(dims)))  # ggml lists the innermost dimension first
    return metadata, tensors


def config_from_metadata(metadata, path: str) -> ModelConfig:
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise GgufError(f"{path}: architecture {arch!r}; the trainer's model is 'llama'")
    get = lambda key: metadata[f"llama.{key}"]
    return ModelConfig(n_vocab=len(metadata["tokenizer.ggml.tokens"]), n_embd=get("embedding_length"),
                       n_layer=get("block_count"), n_head=get("attention.head_count"),
                       n_head_kv=get("attention.head_count_kv"), n_ff=get("feed_forward_length"),
                       n_ctx=get("context_length"), rope_base=float(get("rope.freq_base")),
                       rms_eps=float(get("attention.layer_norm_rms_epsilon")))


def load_model(path: str) -> Llama:
    """The GGUF model as a trainer Llama (its output projection must be tied: no output.weight)."""
    metadata, tensors = read_gguf(path)
    model = Llama(config_from_metadata(metadata, path))
    if "output.weight" in tensors:
        raise GgufError(f"{path}: has an untied output.weight; the trainer's model ties it to token_embd")
    with torch.no_grad():
        for name, parameter in gguf_names(model):
            if name not in tensors:
                raise GgufError(f"{path}: tensor {name} is missing")
            if list(tensors[name].shape) != list(parameter.shape):
                raise GgufError(f"{path}: tensor {name} is {list(tensors[name].shape)}, expected {list(parameter.shape)}")
            parameter.copy_(torch.from_numpy(np.array(tensors[name])))
    return model


def _pack_string(value: str) -> bytes:
    encoded = value.encode("utf-8")
    return struct.pack("<Q", len(encoded)) + encoded


def _pack_value(kind: int, value) -> bytes:
    if kind == STRING:
        return _pack_string(value)
    if kind in SCALAR_FORMATS:
        return struct.pack(SCALAR_FORMATS[kind], value)
    raise GgufError(f"write_gguf: metadata value type {kind} is not written")


def write_gguf(path: str, metadata, tensors):
    """A GGUF v3 file: `metadata` is [(key, type, value)] with type U32, F32, STRING, or
    (ARRAY, item type) for a list; `tensors` is [(name, numpy array)] in PyTorch's layout,
    written as F32 (ggml's dims are the array's shape reversed). Written to a temporary
    name, then renamed, as export.write_safetensors does."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for key, kind, value in metadata:
        out += _pack_string(key)
        if isinstance(kind, tuple):
            item_kind = kind[1]
            out += struct.pack("<IIQ", ARRAY, item_kind, len(value))
            out += b"".join(_pack_value(item_kind, v) for v in value)
        else:
            out += struct.pack("<I", kind) + _pack_value(kind, value)
    blobs, offset = [], 0
    for name, array in tensors:
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        out += _pack_string(name) + struct.pack("<I", array.ndim)
        out += b"".join(struct.pack("<Q", d) for d in reversed(array.shape))
        out += struct.pack("<IQ", GGML_F32, offset)
        blobs.append(data)
        offset += -(-len(data) // ALIGNMENT) * ALIGNMENT
    out += bytes(-len(out) % ALIGNMENT)
    for data in blobs:
        out += data + bytes(-len(data) % ALIGNMENT)
    partial = path + ".partial"
    with open(partial, "wb") as f:
        f.write(out)
    os.replace(partial, path)
