#!/usr/bin/env python3
"""Converts a statebank checkpoint (Hugging Face layout, as `statebank gen-model`
writes it) to a GGUF file that llama.cpp v0.5.0 loads, in F32 or BF16, for
the cross-check (tools/xcheck) and the speed comparison (bench/compare_llama.sh).

    convert.py --outtype f32|bf16 CHECKPOINT_DIR OUT.gguf

Families: qwen3 (GGUF arch qwen3), qwen3_next (qwen3next, MoE only: llama.cpp
has no dense Qwen3-Next), qwen3_5 (qwen35), qwen3_5_moe (qwen35moe), qwen4_exp
and qwen4_exp_text (qwen4exp).

The file is written with llama.cpp's own gguf-py library (PYTHONPATH must hold
the cached tree's gguf-py, tools/llama/env.sh sets it) and Debian's numpy. What
the tensors must look like was read from llama.cpp's conversion code and model
graphs; the facts, not their code, are here:
  * zero-centred RMSNorm weights (every norm of the hybrids except the gated
    norm inside the Gated DeltaNet) are stored as 1 + w;
  * A_log is stored as ssm_a = -exp(A_log); dt_bias as ssm_dt.bias;
  * the depthwise conv weight [C, 1, K] is stored squeezed, [C, K];
  * Qwen3-Next's in_proj_qkvz, per key head [q, k, v(r heads), z(r heads)],
    becomes attn_qkv = [all q | all k | all v] and attn_gate = all z, value
    heads kept grouped by key head; in_proj_ba stays as it is (ssm_ba);
  * Qwen3.5's value heads are reordered from grouped by key head
    [k0v0, k0v1, k1v0, k1v1] to tiled [k0v0, k1v0, k0v1, k1v1] in every tensor
    indexed by value head (qkv's v rows, z, b, a, A_log, dt_bias, the conv's v
    channels, out_proj's columns), since llama.cpp broadcasts key heads tiled;
  * routed experts are stacked into [E, out, in] tensors (gate, up, down);
    the shared expert's gate [1, H] is stored as [H];
  * in BF16 files, norms, 1-D tensors, the conv weight and both routers stay
    F32, every other matrix is BF16 (bf16 checkpoint bits pass unchanged; f32
    values are rounded to nearest even);
  * the MTP head (mtp.*, a hybrid with mtp_num_hidden_layers 1) is one block
    after the trunk's, blk.<n_layers>, counted in block_count, with
    nextn_predict_layers 1 and a non-recurrent entry in recurrent_layers: its
    decoder layer mtp.layers.0 under a full-attention layer's names, mtp.fc as
    nextn.eh_proj, pre_fc_norm_embedding as nextn.enorm, pre_fc_norm_hidden as
    nextn.hnorm and mtp.norm as nextn.shared_head_norm (each norm 1 + w);
  * qwen4exp (llama.cpp's conversion/qwen4exp.py): no norms but the
    hyper-connection mixers' (blk.<i>.hc_attn_* / hc_ffn_*, output_hc_*; the
    mixer norms and the indexer's and PLE layer's norms stored as 1 + w);
    index_qk_proj split into indexer.q_proj (the query heads) and
    indexer.k_proj; the n-gram table's shards concatenated in index order
    into one tensor, per_layer_token_embd, F32 (its rows padded as the
    checkpoint pads them); the PLE conv weight squeezed [W, K]; the three I64
    hash constants as u64 metadata arrays ({arch}.ple.layer_multipliers,
    head_offsets, head_vocab_sizes), never as tensors; eos for the hash the
    last id of an eos_token_id list; the MTP head left out, as llama.cpp's
    converter at this release does;
  * the vocabulary is the checkpoint's byte-level BPE (tokenizer.json) as
    llama.cpp's gpt2 model with the qwen2 pre-tokenizer, padded with unused
    [PADi] entries to the model's vocab size.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint import CheckpointError, Tensors, as_float32, load_config  # noqa: E402

try:
    import gguf  # llama.cpp's gguf-py, from the cached tree (tools/llama/env.sh)
except ImportError as e:  # pragma: no cover - environment problem
    sys.exit(f"convert.py: cannot import gguf ({e}); run through tools/llama/env.sh or set PYTHONPATH to llama.cpp's gguf-py")

T = gguf.MODEL_TENSOR
ARCHES = {
    "qwen3": gguf.MODEL_ARCH.QWEN3,
    "qwen3_next": gguf.MODEL_ARCH.QWEN3NEXT,
    "qwen3_5": gguf.MODEL_ARCH.QWEN35,
    "qwen3_5_moe": gguf.MODEL_ARCH.QWEN35MOE,
    "qwen4_exp": gguf.MODEL_ARCH.QWEN4EXP,
    "qwen4_exp_text": gguf.MODEL_ARCH.QWEN4EXP,
}
QWEN35_LIKE = ("qwen3_5", "qwen3_5_moe", "qwen4_exp", "qwen4_exp_text")  # value heads tiled, M-RoPE sections
# Tensors llama.cpp keeps in F32 whatever the file type (besides 1-D and norms).
KEEP_F32 = {T.FFN_GATE_INP, T.FFN_GATE_INP_SHEXP, T.SSM_CONV1D}


class ConvertError(Exception):
    pass


class Weight:
    """A tensor on its way to the file: values and the checkpoint dtype they
    are stored in (F32, F16, or BF16 bit patterns in uint16)."""

    def __init__(self, data: np.ndarray, dtype: str):
        self.data, self.dtype = data, dtype

    def f32(self) -> "Weight":
        return Weight(as_float32(self.data, self.dtype), "F32")

    def map(self, fn) -> "Weight":  # a pure rearrangement: dtype unchanged
        return Weight(np.ascontiguousarray(fn(self.data)), self.dtype)


def to_grouped_tiled(a: np.ndarray, axis: int, n_k: int, r: int, head: int) -> np.ndarray:
    """Value heads grouped by key head -> tiled, along `axis`."""
    shape = list(a.shape)
    assert shape[axis] == n_k * r * head, (shape, axis, n_k, r, head)
    a = a.reshape(shape[:axis] + [n_k, r, head] + shape[axis + 1:])
    a = np.swapaxes(a, axis, axis + 1)
    return a.reshape(shape)


def bf16_round(f32: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


class Converter:
    def __init__(self, model_dir: str, outtype: str):
        self.dir = model_dir
        self.outtype = outtype
        self.cfg = load_config(model_dir)
        self.family = self.cfg.get("model_type")
        if self.family not in ARCHES:
            raise ConvertError(f"model_type '{self.family}' is not one of {', '.join(ARCHES)}")
        self.arch = ARCHES[self.family]
        self.tensors = Tensors(model_dir)
        self.used: set[str] = set()
        self.out: list[tuple[str, Weight, bool]] = []  # (gguf name, weight, may be bf16)
        c = self.cfg
        self.n_layers = int(c["num_hidden_layers"])
        self.hidden = int(c["hidden_size"])
        self.vocab_size = int(c["vocab_size"])
        self.head_dim = int(c.get("head_dim") or self.hidden // int(c["num_attention_heads"]))
        self.hybrid = self.family != "qwen3"
        self.offset_norms = self.hybrid  # zero-centred (1 + w) RMSNorm
        self.q4 = self.family in ("qwen4_exp", "qwen4_exp_text")
        self.prefix = "model.language_model." if self.family in ("qwen3_5", "qwen3_5_moe", "qwen4_exp") else "model."
        self.layer_types = c.get("layer_types") or (
            ["full_attention"] * self.n_layers if not self.hybrid else
            ["full_attention" if (i + 1) % int(c.get("full_attention_interval", 4)) == 0 else "linear_attention"
             for i in range(self.n_layers)])
        if self.hybrid:
            self.n_k = int(c["linear_num_key_heads"])
            self.n_v = int(c["linear_num_value_heads"])
            self.d_k = int(c["linear_key_head_dim"])
            self.d_v = int(c["linear_value_head_dim"])
            if self.d_k != self.d_v:
                raise ConvertError("llama.cpp's Gated DeltaNet needs linear_key_head_dim == linear_value_head_dim")
            self.r = self.n_v // self.n_k
        rope = c.get("rope_parameters") or {}
        self.rope_theta = float(rope.get("rope_theta", c.get("rope_theta", 1e6 if not self.hybrid else 1e4)))
        self.partial = float(rope.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0 if not self.hybrid else 0.25)))
        self.mrope_section = rope.get("mrope_section")
        n_mtp = int(c.get("mtp_num_hidden_layers", c.get("num_nextn_predict_layers", 0)) or 0)
        self.nextn = self.hybrid and n_mtp == 1 and self.tensors.has("mtp.fc.weight") and not self.q4

    # ---- tensors ----------------------------------------------------------------------------------------------

    def take(self, name: str) -> Weight:
        if not self.tensors.has(name):
            raise ConvertError(f"checkpoint has no tensor {name}")
        self.used.add(name)
        return Weight(self.tensors.get(name), self.tensors.dtype(name))

    def emit(self, kind, bid: int | None, w: Weight, suffix: str = ".weight"):
        name = gguf.TENSOR_NAMES[kind].format(bid=bid) + suffix
        may_bf16 = suffix == ".weight" and w.data.ndim >= 2 and kind not in KEEP_F32 and not name.endswith("_norm.weight")
        self.out.append((name, w, may_bf16))

    def norm(self, name: str) -> Weight:
        w = self.take(name)
        if not self.offset_norms:
            return w
        w = w.f32()
        return Weight(np.float32(1.0) + w.data, "F32")

    def convert_tensors(self):
        if self.q4:
            return self.convert_qwen4exp()
        p = self.prefix
        self.emit(T.TOKEN_EMBD, None, self.take(p + "embed_tokens.weight"))
        self.emit(T.OUTPUT_NORM, None, self.norm(p + "norm.weight"))
        tied = bool(self.cfg.get("tie_word_embeddings", False))
        if not tied:
            self.emit(T.OUTPUT, None, self.take("lm_head.weight"))
        for i in range(self.n_layers):
            lp = f"{p}layers.{i}."
            self.emit(T.ATTN_NORM, i, self.norm(lp + "input_layernorm.weight"))
            post = T.ATTN_POST_NORM if self.hybrid else T.FFN_NORM
            self.emit(post, i, self.norm(lp + "post_attention_layernorm.weight"))
            if self.layer_types[i] == "full_attention":
                self.attention(i, lp + "self_attn.")
            elif self.layer_types[i] == "linear_attention":
                self.delta_net(i, lp + "linear_attn.")
            else:
                raise ConvertError(f"layer {i}: type {self.layer_types[i]} has no llama.cpp counterpart")
            self.mlp(i, lp + "mlp.")
        if self.nextn:
            self.mtp_block(self.n_layers)
        skipped = ("model.visual.", "mtp.", "model.mtp.")
        left = [n for n in self.tensors.names() if n not in self.used and not n.startswith(skipped)]
        if left:
            raise ConvertError(f"tensors not converted: {', '.join(sorted(left)[:8])}{' ...' if len(left) > 8 else ''}")

    # ---- qwen4exp -----------------------------------------------------------------------------------------------

    def q4_is_attention(self, i: int) -> bool:
        return self.layer_types[i] in ("full_attention", "deepseek_sparse_attention", "hybrid_indexed")

    def ple_layers(self) -> list[int]:
        return [int(i) - 1 for i in self.cfg.get("ple_layer_ids") or []]

    def mixer(self, prefix: str, kinds, inject: bool):
        norm, down, up, inj = kinds
        bid = None if norm == T.HC_HEAD_NORM else self.cur
        self.emit(norm, bid, self.norm(prefix + "hc_norm.weight"))
        self.emit(down, bid, self.take(prefix + "input_mix_weight_down.weight"))
        self.emit(up, bid, self.take(prefix + "input_mix_weight_up.weight"))
        if inject:
            self.emit(inj, bid, self.take(prefix + "block_inject_weight.weight"))

    def convert_qwen4exp(self):
        p = self.prefix
        ple = self.ple_layers()
        if len(ple) > 1:
            raise ConvertError(f"{len(ple)} PLE layers: llama.cpp's qwen4exp holds one")
        self.emit(T.TOKEN_EMBD, None, self.take(p + "embed_tokens.weight"))
        self.cur = None
        self.mixer(p + "hyper_connection_mixer.", (T.HC_HEAD_NORM, T.HC_HEAD_DOWN, T.HC_HEAD_UP, None), False)
        if not bool(self.cfg.get("tie_word_embeddings", False)):
            self.emit(T.OUTPUT, None, self.take("lm_head.weight"))
        if ple:
            self.ngram_table(f"{p}layers.{ple[0]}.ple.ple_embedding.")
        for i in range(self.n_layers):
            lp = f"{p}layers.{i}."
            self.cur = i
            self.mixer(lp + "attn_hyper_connection.", (T.HC_ATTN_NORM, T.HC_ATTN_DOWN, T.HC_ATTN_UP, T.HC_ATTN_INJECT), True)
            self.mixer(lp + "mlp_hyper_connection.", (T.HC_FFN_NORM, T.HC_FFN_DOWN, T.HC_FFN_UP, T.HC_FFN_INJECT), True)
            if self.q4_is_attention(i):
                ap = lp + "self_attn."
                self.attention(i, ap)
                qk = self.take(ap + "indexer.index_qk_proj.weight")
                n_q = int(self.cfg["indexer_n_heads"]) * int(self.cfg["indexer_head_dim"])
                self.emit(T.INDEXER_Q_PROJ, i, qk.map(lambda a: a[:n_q]))
                self.emit(T.INDEXER_K_PROJ, i, qk.map(lambda a: a[n_q:]))
                self.emit(T.INDEXER_Q_NORM, i, self.norm(ap + "indexer.q_layernorm.weight"))
                self.emit(T.INDEXER_K_NORM, i, self.norm(ap + "indexer.k_layernorm.weight"))
            elif self.layer_types[i] == "linear_attention":
                self.delta_net(i, lp + "linear_attn.")
            else:
                raise ConvertError(f"layer {i}: type {self.layer_types[i]} is not a qwen4exp layer type")
            if i in ple:
                if self.layer_types[i] != "linear_attention":
                    raise ConvertError(f"PLE layer {i} is not a linear-attention layer, as llama.cpp's qwen4exp requires")
                pp = lp + "ple."
                self.emit(T.PLE_KEY, i, self.take(pp + "key_proj.weight"))
                self.emit(T.PLE_VALUE, i, self.take(pp + "value_proj.weight"))
                self.emit(T.PLE_NORM_KEY, i, self.norm(pp + "norm_key.weight"))
                self.emit(T.PLE_NORM_QUERY, i, self.norm(pp + "norm_query.weight"))
                self.emit(T.PLE_NORM_CONV, i, self.norm(pp + "norm_conv.weight"))
                self.emit(T.PLE_CONV1D, i, self.take(pp + "conv1d.weight").map(lambda a: a.reshape(a.shape[0], a.shape[-1])))
            self.mlp(i, lp + "mlp.")
        skipped = ("model.visual.", "mtp.", "model.mtp.")
        left = [n for n in self.tensors.names() if n not in self.used and not n.startswith(skipped)]
        if left:
            raise ConvertError(f"tensors not converted: {', '.join(sorted(left)[:8])}{' ...' if len(left) > 8 else ''}")

    def ngram_table(self, ep: str):
        parts = int(self.cfg.get("split_ngram_parts", 1))
        shards = [self.take(f"{ep}ngram_embedding.shard_{s}.weight").f32().data for s in range(parts)]
        if len({a.shape[-1] for a in shards}) != 1:
            raise ConvertError("the n-gram table's shards have different row sizes")
        self.ple_row_dim = int(shards[0].shape[-1])
        self.emit(T.PER_LAYER_TOKEN_EMBD, None, Weight(np.concatenate(shards), "F32"))
        self.ple_constants = {}
        for name in ("layer_multipliers", "ngram_heads_offsets", "ngram_heads_vocab_sizes"):
            t = self.tensors.get_int64(ep + name)
            self.used.add(ep + name)
            self.ple_constants[name] = [int(x) for x in t]

    def write_qwen4exp_metadata(self, w: "gguf.GGUFWriter"):
        c = self.cfg
        w.add_hyper_connection_count(int(c["hc_count"]))
        w.add_hyper_connection_low_rank(int(c["hc_lowrank"]))
        w.add_indexer_head_count(int(c["indexer_n_heads"]))
        w.add_indexer_key_length(int(c["indexer_head_dim"]))
        w.add_indexer_top_k(int(c["indexer_budget"]))
        ratio = int(c["indexer_compress_ratio"])
        w.add_attention_compress_ratios([ratio if self.q4_is_attention(i) else 0 for i in range(self.n_layers)])
        ple = self.ple_layers()
        if not ple:
            return
        w.add_ple_layers(ple)
        w.add_ple_ngram_size(int(c.get("ngram_size", 3)))
        w.add_ple_heads_per_ngram(int(c["heads_per_ngram"]))
        w.add_ple_conv_kernel(int(c.get("ple_conv_kernel_size", 4)))
        eos = c.get("eos_token_id")
        if eos is None:
            raise ConvertError("eos_token_id is missing (the PLE hash cuts n-grams on it)")
        w.add_ple_eos_token_id(int(eos[-1] if isinstance(eos, list) else eos))
        w.add_embedding_length_per_layer_input(self.ple_row_dim)
        w.add_ple_layer_multipliers(self.ple_constants["layer_multipliers"])
        w.add_ple_head_offsets(self.ple_constants["ngram_heads_offsets"])
        w.add_ple_head_vocab_sizes(self.ple_constants["ngram_heads_vocab_sizes"])

    def mtp_block(self, i: int):
        lp = "mtp.layers.0."
        self.emit(T.ATTN_NORM, i, self.norm(lp + "input_layernorm.weight"))
        self.emit(T.ATTN_POST_NORM, i, self.norm(lp + "post_attention_layernorm.weight"))
        self.attention(i, lp + "self_attn.")
        self.mlp(i, lp + "mlp.")
        self.emit(T.NEXTN_EH_PROJ, i, self.take("mtp.fc.weight"))
        self.emit(T.NEXTN_ENORM, i, self.norm("mtp.pre_fc_norm_embedding.weight"))
        self.emit(T.NEXTN_HNORM, i, self.norm("mtp.pre_fc_norm_hidden.weight"))
        self.emit(T.NEXTN_SHARED_HEAD_NORM, i, self.norm("mtp.norm.weight"))

    def attention(self, i: int, ap: str):
        self.emit(T.ATTN_Q, i, self.take(ap + "q_proj.weight"))  # hybrids: [query | gate] per head, as llama.cpp reads it
        self.emit(T.ATTN_K, i, self.take(ap + "k_proj.weight"))
        self.emit(T.ATTN_V, i, self.take(ap + "v_proj.weight"))
        self.emit(T.ATTN_OUT, i, self.take(ap + "o_proj.weight"))
        self.emit(T.ATTN_Q_NORM, i, self.norm(ap + "q_norm.weight"))
        self.emit(T.ATTN_K_NORM, i, self.norm(ap + "k_norm.weight"))

    def delta_net(self, i: int, lp: str):
        n_k, r, d_k, d_v, H = self.n_k, self.r, self.d_k, self.d_v, self.hidden
        key_dim = n_k * d_k
        tiled = self.family in QWEN35_LIKE
        per_v = (lambda a, axis, head: to_grouped_tiled(a, axis, n_k, r, head)) if tiled else (lambda a, axis, head: a)

        if self.family == "qwen3_next":
            qkvz = self.take(lp + "in_proj_qkvz.weight")
            def split(a):
                g = a.reshape(n_k, 2 * d_k + 2 * r * d_v, H)
                q, k = g[:, :d_k], g[:, d_k:2 * d_k]
                v, z = g[:, 2 * d_k:2 * d_k + r * d_v], g[:, 2 * d_k + r * d_v:]
                return np.concatenate([q.reshape(-1, H), k.reshape(-1, H), v.reshape(-1, H)]), z.reshape(-1, H)
            self.emit(T.ATTN_QKV, i, qkvz.map(lambda a: split(a)[0]))
            self.emit(T.ATTN_GATE, i, qkvz.map(lambda a: split(a)[1]))
            self.emit(T.SSM_BETA_ALPHA, i, self.take(lp + "in_proj_ba.weight"))
        else:
            qkv = self.take(lp + "in_proj_qkv.weight")
            self.emit(T.ATTN_QKV, i, qkv.map(lambda a: np.concatenate([a[:2 * key_dim], per_v(a[2 * key_dim:], 0, d_v)])))
            self.emit(T.ATTN_GATE, i, self.take(lp + "in_proj_z.weight").map(lambda a: per_v(a, 0, d_v)))
            self.emit(T.SSM_BETA, i, self.take(lp + "in_proj_b.weight").map(lambda a: per_v(a, 0, 1)))
            self.emit(T.SSM_ALPHA, i, self.take(lp + "in_proj_a.weight").map(lambda a: per_v(a, 0, 1)))

        conv = self.take(lp + "conv1d.weight").map(lambda a: a.reshape(a.shape[0], a.shape[-1]))
        self.emit(T.SSM_CONV1D, i, conv.map(lambda a: np.concatenate([a[:2 * key_dim], per_v(a[2 * key_dim:], 0, d_v)])))
        self.emit(T.SSM_DT, i, self.take(lp + "dt_bias").f32().map(lambda a: per_v(a, 0, 1)), suffix=".bias")
        a_log = self.take(lp + "A_log").f32()
        ssm_a = (-np.exp(a_log.data.astype(np.float64))).astype(np.float32)
        self.emit(T.SSM_A, i, Weight(per_v(ssm_a, 0, 1), "F32"), suffix="")
        self.emit(T.SSM_NORM, i, self.take(lp + "norm.weight"))  # the gated norm: plain weight, shared by heads
        self.emit(T.SSM_OUT, i, self.take(lp + "out_proj.weight").map(lambda a: per_v(a, 1, d_v)))

    def mlp(self, i: int, mp: str):
        if not self.tensors.has(mp + "gate.weight"):
            if self.family in ("qwen3_next", "qwen3_5_moe"):
                raise ConvertError(f"layer {i} is dense: llama.cpp's {self.arch.name.lower()} has MoE layers only")
            self.emit(T.FFN_GATE, i, self.take(mp + "gate_proj.weight"))
            self.emit(T.FFN_UP, i, self.take(mp + "up_proj.weight"))
            self.emit(T.FFN_DOWN, i, self.take(mp + "down_proj.weight"))
            return
        if self.family in ("qwen3", "qwen3_5"):
            raise ConvertError(f"layer {i} is MoE but {self.family} is a dense family")
        self.emit(T.FFN_GATE_INP, i, self.take(mp + "gate.weight"))
        n_exp = int(self.cfg["num_experts"])
        if self.tensors.has(mp + "experts.gate_up_proj"):  # fused [E, 2I, H]: gate rows then up rows
            gu = self.take(mp + "experts.gate_up_proj")
            half = gu.data.shape[1] // 2
            self.emit(T.FFN_GATE_EXP, i, gu.map(lambda a: a[:, :half]))
            self.emit(T.FFN_UP_EXP, i, gu.map(lambda a: a[:, half:]))
            self.emit(T.FFN_DOWN_EXP, i, self.take(mp + "experts.down_proj"))
        else:  # one 2-D tensor per expert
            for part, kind in (("gate_proj", T.FFN_GATE_EXP), ("up_proj", T.FFN_UP_EXP), ("down_proj", T.FFN_DOWN_EXP)):
                ws = [self.take(f"{mp}experts.{e}.{part}.weight") for e in range(n_exp)]
                if len({w.dtype for w in ws}) != 1:
                    ws = [w.f32() for w in ws]
                self.emit(kind, i, Weight(np.stack([w.data for w in ws]), ws[0].dtype))
        if self.tensors.has(mp + "shared_expert.gate_proj.weight"):
            self.emit(T.FFN_GATE_SHEXP, i, self.take(mp + "shared_expert.gate_proj.weight"))
            self.emit(T.FFN_UP_SHEXP, i, self.take(mp + "shared_expert.up_proj.weight"))
            self.emit(T.FFN_DOWN_SHEXP, i, self.take(mp + "shared_expert.down_proj.weight"))
            self.emit(T.FFN_GATE_INP_SHEXP, i, self.take(mp + "shared_expert_gate.weight").map(lambda a: a.reshape(-1)))

    # ---- metadata ---------------------------------------------------------------------------------------------

    def rope_sections(self, rot: int) -> list[int]:
        if self.mrope_section:
            s = [int(x) for x in self.mrope_section][:4]
            return s + [0] * (4 - len(s))
        # Interleaved M-RoPE: frequency slot j takes the t/h/w position by j % 3.
        # With text positions all three are equal, so any split that covers
        # every slot is plain RoPE; this is the one Qwen3.5's [11, 11, 10] is
        # for 32 slots.
        n = rot // 2
        return [math.ceil(n / 3), math.ceil((n - 1) / 3), n // 3, 0]

    def write_metadata(self, w: "gguf.GGUFWriter"):
        c = self.cfg
        w.add_name(f"statebank {self.family} {os.path.basename(os.path.normpath(self.dir))}")
        w.add_file_type(gguf.LlamaFileType.ALL_F32 if self.outtype == "f32" else gguf.LlamaFileType.MOSTLY_BF16)
        w.add_block_count(self.n_layers + int(self.nextn))
        if self.nextn:
            w.add_nextn_predict_layers(1)
        w.add_context_length(int(c.get("max_position_embeddings", 32768)))
        w.add_embedding_length(self.hidden)
        if int(c.get("intermediate_size", 0) or 0) > 0:
            w.add_feed_forward_length(int(c["intermediate_size"]))
        w.add_head_count(int(c["num_attention_heads"]))
        w.add_head_count_kv(int(c["num_key_value_heads"]))
        w.add_key_length(self.head_dim)
        w.add_value_length(self.head_dim)
        w.add_layer_norm_rms_eps(float(c.get("rms_norm_eps", 1e-6)))
        w.add_rope_freq_base(self.rope_theta)
        rot = int(self.head_dim * self.partial)
        w.add_rope_dimension_count(rot)
        if int(c.get("num_experts", 0) or 0) > 0:
            if c.get("norm_topk_prob", True) is False:
                raise ConvertError("norm_topk_prob false: llama.cpp always renormalises the top-k expert weights")
            w.add_expert_count(int(c["num_experts"]))
            w.add_expert_used_count(int(c["num_experts_per_tok"]))
            w.add_expert_feed_forward_length(int(c["moe_intermediate_size"]))
            if int(c.get("shared_expert_intermediate_size", 0) or 0) > 0:
                w.add_expert_shared_feed_forward_length(int(c["shared_expert_intermediate_size"]))
        if self.hybrid:
            w.add_ssm_conv_kernel(int(c.get("linear_conv_kernel_dim", 4)))
            w.add_ssm_state_size(self.d_k)
            w.add_ssm_group_count(self.n_k)
            w.add_ssm_time_step_rank(self.n_v)
            w.add_ssm_inner_size(self.n_v * self.d_v)
            w.add_full_attention_interval(int(c.get("full_attention_interval", 4)))
            w.add_recurrent_layers([t == "linear_attention" for t in self.layer_types] + [False] * int(self.nextn))
        if self.family in QWEN35_LIKE:
            w.add_rope_dimension_sections(self.rope_sections(rot))
        if self.q4:
            self.write_qwen4exp_metadata(w)

    def write_vocab(self, w: "gguf.GGUFWriter"):
        path = os.path.join(self.dir, "tokenizer.json")
        try:
            with open(path, encoding="utf-8") as f:
                tok = json.load(f)
        except (OSError, ValueError) as e:
            raise ConvertError(f"{path}: {e}") from e
        by_id = {int(i): t for t, i in tok["model"]["vocab"].items()}
        added = {int(a["id"]): a for a in tok.get("added_tokens", [])}
        tokens, types = [], []
        for i in range(self.vocab_size):
            if i in added:
                text = added[i]["content"]
                special = added[i].get("special") or (text.startswith("<|") and text.endswith("|>"))
                tokens.append(text)
                types.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
            elif i in by_id:
                tokens.append(by_id[i])
                types.append(gguf.TokenType.NORMAL)
            else:
                tokens.append(f"[PAD{i}]")
                types.append(gguf.TokenType.UNUSED)
        if max(list(by_id) + list(added)) >= self.vocab_size:
            raise ConvertError(f"the tokenizer has ids beyond vocab_size {self.vocab_size}")
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        gguf.SpecialVocab(self.dir, load_merges=True, n_vocab=self.vocab_size).add_to_gguf(w, quiet=True)

    # ---- file -------------------------------------------------------------------------------------------------

    def write(self, out_path: str):
        self.convert_tensors()
        tmp = out_path + ".tmp"
        w = gguf.GGUFWriter(tmp, gguf.MODEL_ARCH_NAMES[self.arch])
        self.write_metadata(w)
        self.write_vocab(w)
        for name, weight, may_bf16 in self.out:
            if self.outtype == "bf16" and may_bf16:
                bits = weight.data if weight.dtype == "BF16" else bf16_round(weight.f32().data)
                w.add_tensor(name, np.ascontiguousarray(bits, dtype=np.uint16), raw_dtype=gguf.GGMLQuantizationType.BF16)
            else:
                w.add_tensor(name, np.ascontiguousarray(weight.f32().data))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, out_path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outtype", choices=("f32", "bf16"), required=True)
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    a = ap.parse_args()
    try:
        Converter(a.checkpoint, a.outtype).write(a.out)
    except (ConvertError, CheckpointError, KeyError) as e:
        print(f"convert.py: {a.checkpoint}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
