"""Reads a Hugging Face checkpoint directory the way statebank writes and loads
it: config.json (flat, or nested under text_config for qwen3_5 / qwen3_5_moe)
and one or more safetensors files, memory-mapped.

Tensors come back as numpy arrays without a copy: float32 for F32 tensors and
uint16 bit patterns for BF16 ones (numpy has no bfloat16), so the converter can
pass bf16 weights through bit for bit. Thread safety: none needed (one process,
one thread).
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "BF16": np.uint16, "F16": np.float16, "I64": np.int64}


class CheckpointError(Exception):
    pass


def load_config(model_dir: str) -> dict:
    """config.json with text_config's fields lifted to the top level."""
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: {e}") from e
    text = config.get("text_config")
    if isinstance(text, dict):
        config = {**config, **text, "model_type": config.get("model_type")}
    return config


def _safetensors_files(model_dir: str) -> list[str]:
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(model_dir, name) for name in files]
    single = os.path.join(model_dir, "model.safetensors")
    if not os.path.exists(single):
        raise CheckpointError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")
    return [single]


class Tensors:
    """name -> array, over every safetensors file of the checkpoint."""

    def __init__(self, model_dir: str):
        self._where: dict[str, tuple[np.memmap, str, list[int], int, int]] = {}
        for path in _safetensors_files(model_dir):
            with open(path, "rb") as f:
                (header_len,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(header_len))
            data = np.memmap(path, dtype=np.uint8, mode="r")
            base = 8 + header_len
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                if info["dtype"] not in _DTYPES:
                    raise CheckpointError(f"{path}: tensor {name} has dtype {info['dtype']} (F32, BF16, F16, I64 only)")
                begin, end = info["data_offsets"]
                self._where[name] = (data, info["dtype"], info["shape"], base + begin, base + end)

    def names(self) -> list[str]:
        return list(self._where)

    def has(self, name: str) -> bool:
        return name in self._where

    def dtype(self, name: str) -> str:
        return self._where[name][1]

    def get_int64(self, name: str) -> np.ndarray:
        """An I64 tensor's values (qwen4exp's n-gram hash constants)."""
        if name not in self._where or self._where[name][1] != "I64":
            raise CheckpointError(f"checkpoint has no I64 tensor {name}")
        return self.get(name)

    def get(self, name: str) -> np.ndarray:
        """The stored values: float32, float16, uint16 bf16 bit patterns, or int64."""
        if name not in self._where:
            raise CheckpointError(f"checkpoint has no tensor {name}")
        data, dtype, shape, begin, end = self._where[name]
        array = np.frombuffer(data, dtype=_DTYPES[dtype], count=(end - begin) // np.dtype(_DTYPES[dtype]).itemsize,
                              offset=begin)
        return array.reshape(shape)


def as_float32(array: np.ndarray, dtype: str) -> np.ndarray:
    """Exact widening to float32 (bf16 bits shifted into the high half)."""
    if dtype == "BF16":
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32)
