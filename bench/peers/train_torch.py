#!/usr/bin/env python3
"""train_torch.py — PyTorch running the LoRA fine-tune `tern train --bench --lora-base` runs, for
the side-by-side training figure (bench/peers/train_side_by_side.sh).

Same work as tern's --bench step: the base model's shape read from its GGUF (llama, as tern's
trainer models it), its weights random and frozen in F32 (the values do not change the work),
rank-R adapters on q, k, v, o, gate, up, down in PEFT's convention (W x + alpha/r B A x), one
micro-batch of n_ctx random tokens, every token trained on (cross-entropy over the vocabulary),
forward + backward + AdamW on the adapters, F32 throughout. Causal attention is PyTorch's
scaled_dot_product_attention (its fused CPU kernel), the MLP SwiGLU, RMSNorm and RoPE as the
model's. Prints one JSON line: tokens/s over the timed steps after warm-up steps.

usage: train_torch.py BASE.gguf [--rank 16] [--ctx 1024] [--steps 3] [--warmup 1] [--threads 2]
"""
import argparse
import json
import time

import torch
from gguf import GGUFReader


def shape_of(path):
    r = GGUFReader(path)
    kv = {f.name: f for f in r.fields.values()}
    arch = kv["general.architecture"].parts[kv["general.architecture"].data[0]].tobytes().decode()

    def num(key):
        f = kv[f"{arch}.{key}"]
        return int(f.parts[f.data[0]][0])

    vocab = len(kv["tokenizer.ggml.tokens"].data)
    tied = not any(t.name == "output.weight" for t in r.tensors)
    return dict(D=num("embedding_length"), L=num("block_count"), H=num("attention.head_count"),
                Hkv=num("attention.head_count_kv"), F=num("feed_forward_length"), V=vocab, tied=tied,
                arch=arch)


class LoraLinear(torch.nn.Module):
    def __init__(self, n_in, n_out, r, alpha, bias=False):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(n_out, n_in) * 0.02, requires_grad=False)
        self.b = torch.nn.Parameter(torch.zeros(n_out), requires_grad=False) if bias else None
        self.a = torch.nn.Parameter(torch.empty(r, n_in).uniform_(-n_in ** -0.5, n_in ** -0.5))
        self.bb = torch.nn.Parameter(torch.zeros(n_out, r))
        self.s = alpha / r

    def forward(self, x):
        y = torch.nn.functional.linear(x, self.w, self.b)
        return y + self.s * torch.nn.functional.linear(torch.nn.functional.linear(x, self.a), self.bb)


class Block(torch.nn.Module):
    def __init__(self, c, r, alpha):
        super().__init__()
        D, H, Hkv, F = c["D"], c["H"], c["Hkv"], c["F"]
        hd = D // H
        bias = c["arch"] == "qwen2"
        self.H, self.Hkv, self.hd = H, Hkv, hd
        self.n1 = torch.nn.Parameter(torch.ones(D), requires_grad=False)
        self.n2 = torch.nn.Parameter(torch.ones(D), requires_grad=False)
        self.q = LoraLinear(D, H * hd, r, alpha, bias)
        self.k = LoraLinear(D, Hkv * hd, r, alpha, bias)
        self.v = LoraLinear(D, Hkv * hd, r, alpha, bias)
        self.o = LoraLinear(H * hd, D, r, alpha)
        self.gate = LoraLinear(D, F, r, alpha)
        self.up = LoraLinear(D, F, r, alpha)
        self.down = LoraLinear(F, D, r, alpha)

    def forward(self, x, cos, sin):
        T = x.shape[0]
        h = torch.nn.functional.rms_norm(x, (x.shape[-1],), self.n1, 1e-5)
        q = self.q(h).view(T, self.H, self.hd).transpose(0, 1)
        k = self.k(h).view(T, self.Hkv, self.hd).transpose(0, 1)
        v = self.v(h).view(T, self.Hkv, self.hd).transpose(0, 1)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                             enable_gqa=self.H != self.Hkv)
        x = x + self.o(a.transpose(0, 1).reshape(T, -1))
        h = torch.nn.functional.rms_norm(x, (x.shape[-1],), self.n2, 1e-5)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def rope(x, cos, sin):
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    c = shape_of(args.base)
    alpha = 2.0 * args.rank
    emb = torch.nn.Parameter(torch.randn(c["V"], c["D"]) * 0.02, requires_grad=False)
    out_w = emb if c["tied"] else torch.nn.Parameter(torch.randn(c["V"], c["D"]) * 0.02, requires_grad=False)
    blocks = torch.nn.ModuleList(Block(c, args.rank, alpha) for _ in range(c["L"]))
    norm = torch.nn.Parameter(torch.ones(c["D"]), requires_grad=False)
    params = [p for p in blocks.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
    hd = c["D"] // c["H"]
    ang = torch.arange(args.ctx)[:, None] * 10000.0 ** (-torch.arange(0, hd, 2) / hd)[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)

    def step():
        toks = torch.randint(0, c["V"], (args.ctx + 1,))
        x = emb[toks[:-1]]
        for b in blocks:
            x = b(x, cos, sin)
        x = torch.nn.functional.rms_norm(x, (c["D"],), norm, 1e-5)
        loss = torch.nn.functional.cross_entropy(x @ out_w.T, toks[1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    dt = time.perf_counter() - t0
    n_train = sum(p.numel() for p in params)
    print(json.dumps({"peer": "pytorch", "version": torch.__version__, "threads": args.threads,
                      "rank": args.rank, "n_ctx": args.ctx, "steps": args.steps,
                      "adapter_params": n_train, "seconds": round(dt, 3),
                      "tokens_per_s": round(args.steps * args.ctx / dt, 1)}))


if __name__ == "__main__":
    main()
