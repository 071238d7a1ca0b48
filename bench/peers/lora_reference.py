#!/usr/bin/env python3
"""lora_reference.py — PyTorch's LoRA math on a small llama, the reference tern's trainer is
checked against (tests/test_train_lora.c, test_torch_reference).

The base is `tern synth tiny:f32 --seed 7` (llama: n_embd 256, 4 layers, 8/4 heads, n_ff 768,
vocab 512), read from its GGUF with the gguf package. Every q, k, v, o, gate, up and down matrix
gets a rank-4 adapter in PEFT's convention, W x + (alpha / r) B (A x) with alpha 8; A and B are
filled from the same 64-bit LCG the C test uses (so nothing but the results is stored). One
document of 32 tokens (also from the LCG) is scored on its second half: the loss is the mean
cross-entropy of the next token where the mask is set, exactly as tern's packing defines it.
Autograd gives dL/dA and dL/dB; the script writes the loss and, for every adapter tensor, its
gradient's norm and 8 entries at fixed indices to tests/data/lora_train/torch_ref.json.

Run from the repository (torch, numpy and gguf in bench's virtual environment):
    build/bin/tern synth tiny:f32 --seed 7 -o /tmp/tiny-f32.gguf
    bench/peers/.venv/bin/python bench/peers/lora_reference.py /tmp/tiny-f32.gguf \
        tests/data/lora_train/torch_ref.json
The computation is float64 (the reference; tern's F32 trainer is compared with a tolerance).
"""
import hashlib
import json
import sys

import numpy as np
import torch
from gguf import GGUFReader

RANK, ALPHA, T = 4, 8.0, 32
TARGETS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]


class Lcg:
    """The C test's generator: s = s * 6364136223846793005 + 1442695040888963407 (mod 2^64)."""

    def __init__(self, seed):
        self.s = seed

    def next(self):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return self.s

    def uniform(self, scale):  # (u - 0.5) * scale with u = top 53 bits / 2^53, as in C
        return ((self.next() >> 11) / 9007199254740992.0 - 0.5) * scale


def load(path):
    r = GGUFReader(path)
    kv = {f.name: f for f in r.fields.values()}

    def num(key):
        f = kv[key]
        return f.parts[f.data[0]][0].item()

    w = {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]  # GGUF ne[0] is the row length
        w[t.name] = torch.tensor(np.array(t.data, dtype=np.float32).reshape(shape), dtype=torch.float64)
    hp = dict(D=num("llama.embedding_length"), L=num("llama.block_count"),
              H=num("llama.attention.head_count"), Hkv=num("llama.attention.head_count_kv"),
              eps=num("llama.attention.layer_norm_rms_epsilon"), base=num("llama.rope.freq_base"))
    return w, hp


def rmsnorm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, base):
    """ggml's NORM rope: pairs (2i, 2i+1) of each head, angle pos * base^(-2i/hd)."""
    n, h, hd = x.shape
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = pos * inv[None, :]
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def main():
    base_path, out_path = sys.argv[1], sys.argv[2]
    w, hp = load(base_path)
    D, L, H, Hkv, eps = hp["D"], hp["L"], hp["H"], hp["Hkv"], hp["eps"]
    hd = D // H
    g = Lcg(11)
    lora = {}  # name -> (A (r, in), B (out, r)), leaf tensors
    order = []
    for l in range(L):
        for t in TARGETS:
            W = w[f"blk.{l}.{t}.weight"]
            n_out, n_in = W.shape
            a = torch.tensor([g.uniform(0.4) for _ in range(RANK * n_in)], dtype=torch.float64)
            b = torch.tensor([g.uniform(0.4) for _ in range(n_out * RANK)], dtype=torch.float64)
            name = f"blk.{l}.{t}.weight"
            lora[name] = (a.reshape(RANK, n_in).requires_grad_(), b.reshape(n_out, RANK).requires_grad_())
            order.append(name)
    toks = [g.next() % 512 for _ in range(T)]
    mask = [1 if i >= T // 2 else 0 for i in range(T)]
    s = ALPHA / RANK

    def lin(x, name):
        A, B = lora[name]
        return x @ w[name].T + s * ((x @ A.T) @ B.T)

    x = w["token_embd.weight"][torch.tensor(toks)]
    causal = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(L):
        p = f"blk.{l}."
        xn = rmsnorm(x, w[p + "attn_norm.weight"], eps)
        q = rope(lin(xn, p + "attn_q.weight").reshape(T, H, hd), hp["base"])
        k = rope(lin(xn, p + "attn_k.weight").reshape(T, Hkv, hd), hp["base"])
        v = lin(xn, p + "attn_v.weight").reshape(T, Hkv, hd)
        rep = H // Hkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = torch.einsum("ihd,jhd->hij", q, k) / hd ** 0.5 + causal
        o = torch.einsum("hij,jhd->ihd", torch.softmax(att, -1), v).reshape(T, D)
        x = x + lin(o, p + "attn_output.weight")
        xn = rmsnorm(x, w[p + "ffn_norm.weight"], eps)
        h = torch.nn.functional.silu(lin(xn, p + "ffn_gate.weight")) * lin(xn, p + "ffn_up.weight")
        x = x + lin(h, p + "ffn_down.weight")
    xf = rmsnorm(x, w["output_norm.weight"], eps)
    out_w = w["output.weight"] if "output.weight" in w else w["token_embd.weight"]
    logits = xf @ out_w.T
    rows = [i for i in range(T - 1) if mask[i + 1]]
    targets = torch.tensor([toks[i + 1] for i in rows])
    loss = torch.nn.functional.cross_entropy(logits[rows], targets)
    loss.backward()
    ref = {"base": "tern synth tiny:f32 --seed 7",
           "base_sha256": hashlib.sha256(open(base_path, "rb").read()).hexdigest(),
           "torch": torch.__version__, "rank": RANK, "alpha": ALPHA, "n_ctx": T, "loss": loss.item(),
           "grads": []}
    for name in order:
        for part, tensor in zip(("lora_a", "lora_b"), lora[name]):
            gr = tensor.grad.reshape(-1)
            idx = [(k * 7919 + 13) % gr.numel() for k in range(8)]
            ref["grads"].append({"tensor": f"{name}.{part}", "norm": gr.norm().item(),
                                 "at": idx, "values": [gr[i].item() for i in idx]})
    with open(out_path, "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    print(f"loss {loss.item():.6f}, {len(ref['grads'])} gradient tensors -> {out_path}")


if __name__ == "__main__":
    main()
