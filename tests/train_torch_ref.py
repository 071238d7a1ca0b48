#!/usr/bin/env python3
"""train_torch_ref.py -- the same Llama/Qwen2 training step as tern's trainer, in PyTorch.

Two uses:
  check DIR   (tests/test_train_torch.c) reads DIR/config.json, DIR/weights.bin (tern's flat F32
              layout, tensors listed in config.json), DIR/batches.bin (every micro-batch of every
              step as tern packed it: token, position, document start, target, weight per row),
              runs the steps with torch.optim.AdamW, warmup + cosine and clip_grad_norm_, and
              writes DIR/torch_losses.json and DIR/torch_weights.bin (same layout).
  bench ...   times training steps of a model of the given shape on random tokens (the same work
              per step as `tern train --bench`: forward, backward, AdamW) and prints JSON.

The model mirrors src/train/train_model.c: RMSNorm, RoPE (NORM pairs (2i, 2i+1) for llama,
NEOX pairs (i, i + d/2) for qwen2, with q/k/v biases), GQA attention where row i sees rows
[start_i, i] of its own sequence, SwiGLU, tied or untied output, cross-entropy on rows with
weight > 0 averaged over the masked rows of the whole step.
"""
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def rope_table(n_pos, n_rot, base):
    """cos/sin of pos * base^(-2i/n_rot), the angle built by repeated float32 multiplication as
    tern (and ggml) do."""
    half = n_rot // 2
    theta_scale = np.float32(np.float32(base) ** np.float32(-2.0 / n_rot))
    cs = np.zeros((n_pos, half, 2), dtype=np.float32)
    for p in range(n_pos):
        theta = np.float32(p)
        for i in range(half):
            cs[p, i, 0] = np.cos(theta)
            cs[p, i, 1] = np.sin(theta)
            theta = np.float32(theta * theta_scale)
    return torch.from_numpy(cs)


def apply_rope(x, cos, sin, neox):
    # x (N, heads, hd); cos/sin (N, 1, hd/2)
    hd = x.shape[-1]
    if neox:
        x0, x1 = x[..., : hd // 2], x[..., hd // 2:]
        return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
    return out.flatten(-2)


class Model:
    def __init__(self, cfg, params):
        self.c = cfg
        self.p = params  # name -> tensor (requires grad)
        hd = cfg["n_embd"] // cfg["n_head"]
        self.hd = hd
        self.rope = rope_table(cfg["n_ctx"], hd, cfg["rope_base"])

    def rmsnorm(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c["rms_eps"]) * w

    def forward(self, tok, pos, start, n_seq, fast_attn=False):
        c, p, hd = self.c, self.p, self.hd
        T = c["n_ctx"]
        H, Hkv = c["n_head"], c["n_head_kv"]
        neox = c["arch"] == "qwen2"
        x = p["token_embd.weight"][tok.long()]
        cs = self.rope[pos.long()]
        cos, sin = cs[..., 0].unsqueeze(1), cs[..., 1].unsqueeze(1)
        idx = torch.arange(T)
        # allowed[s, i, j]: row i of sequence s sees j in [start_i, i]
        st = start.view(n_seq, T)
        allowed = (idx.view(1, 1, T) <= idx.view(1, T, 1)) & (idx.view(1, 1, T) >= st.view(n_seq, T, 1))
        for l in range(c["n_layer"]):
            b = "blk.%d." % l
            xn = self.rmsnorm(x, p[b + "attn_norm.weight"])
            q = xn @ p[b + "attn_q.weight"].t()
            k = xn @ p[b + "attn_k.weight"].t()
            v = xn @ p[b + "attn_v.weight"].t()
            if neox:
                q = q + p[b + "attn_q.bias"]
                k = k + p[b + "attn_k.bias"]
                v = v + p[b + "attn_v.bias"]
            q = apply_rope(q.view(-1, H, hd), cos, sin, neox)
            k = apply_rope(k.view(-1, Hkv, hd), cos, sin, neox)
            v = v.view(-1, Hkv, hd)
            q = q.view(n_seq, T, H, hd).transpose(1, 2)
            k = k.view(n_seq, T, Hkv, hd).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
            v = v.view(n_seq, T, Hkv, hd).transpose(1, 2).repeat_interleave(H // Hkv, dim=1)
            if fast_attn and hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed.unsqueeze(1))
            else:
                s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
                s = s.masked_fill(~allowed.unsqueeze(1), float("-inf"))
                o = torch.softmax(s, dim=-1) @ v
            o = o.transpose(1, 2).reshape(n_seq * T, H * hd)
            x = x + o @ p[b + "attn_output.weight"].t()
            xn = self.rmsnorm(x, p[b + "ffn_norm.weight"])
            h = F.silu(xn @ p[b + "ffn_gate.weight"].t()) * (xn @ p[b + "ffn_up.weight"].t())
            x = x + h @ p[b + "ffn_down.weight"].t()
        x = self.rmsnorm(x, p["output_norm.weight"])
        out = p["output.weight"] if "output.weight" in p else p["token_embd.weight"]
        return x, out

    def loss_sum(self, tok, pos, start, target, weight, n_seq, fast_attn=False):
        x, out = self.forward(tok, pos, start, n_seq, fast_attn)
        rows = torch.nonzero(weight > 0).squeeze(1)
        logits = x[rows] @ out.t()
        ce = F.cross_entropy(logits, target[rows].long(), reduction="none")
        return (ce * weight[rows]).sum()


def lr_at(c, step):
    if c["warmup"] > 0 and step <= c["warmup"]:
        return c["lr"] * step / c["warmup"]
    span = c["steps"] - c["warmup"]
    if span <= 0:
        return c["lr"]
    f = min(1.0, (step - c["warmup"]) / span)
    return c["lr_min"] + 0.5 * (c["lr"] - c["lr_min"]) * (1 + math.cos(math.pi * f))


def make_opt(c, params, tensors):
    decay = [params[t["name"]] for t in tensors if t["n_dims"] == 2]
    other = [params[t["name"]] for t in tensors if t["n_dims"] != 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": c["weight_decay"]},
                              {"params": other, "weight_decay": 0.0}],
                             lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["adam_eps"])


def train_step(c, model, opt, params, batches, step, fast_attn=False):
    n_loss = sum(float((b[4] > 0).sum()) for b in batches)
    opt.zero_grad(set_to_none=False)
    total = 0.0
    for b in batches:
        tok, pos, start, target, weight = b
        loss = model.loss_sum(tok, pos, start, target, weight, c["n_seq"], fast_attn) / n_loss
        loss.backward()
        total += float(loss)
    if c["clip"] > 0:
        torch.nn.utils.clip_grad_norm_(list(params.values()), c["clip"])
    for g in opt.param_groups:
        g["lr"] = lr_at(c, step)
    opt.step()
    return total


def check(d):
    c = json.load(open(d + "/config.json"))
    tensors = c["tensors"]
    flat = np.fromfile(d + "/weights.bin", dtype=np.float32)
    params = {}
    for t in tensors:
        n = t["ne0"] * t["ne1"]
        a = flat[t["off"]: t["off"] + n].reshape(t["ne1"], t["ne0"]) if t["n_dims"] == 2 \
            else flat[t["off"]: t["off"] + n]
        params[t["name"]] = torch.tensor(a.copy(), requires_grad=True)
    model = Model(c, params)
    opt = make_opt(c, params, tensors)
    N = c["n_seq"] * c["n_ctx"]
    raw = np.fromfile(d + "/batches.bin", dtype=np.int32)
    per = 5 * N
    losses = []
    k = 0
    for step in range(1, c["run_steps"] + 1):
        batches = []
        for _ in range(c["accum"]):
            chunk = raw[k * per: (k + 1) * per].reshape(5, N)
            k += 1
            batches.append((torch.from_numpy(chunk[0].copy()), torch.from_numpy(chunk[1].copy()),
                            torch.from_numpy(chunk[2].copy()), torch.from_numpy(chunk[3].copy()),
                            torch.from_numpy(chunk[4].copy().view(np.float32))))
        losses.append(train_step(c, model, opt, params, batches, step))
    json.dump(losses, open(d + "/torch_losses.json", "w"))
    out = flat.copy()
    for t in tensors:
        n = t["ne0"] * t["ne1"]
        out[t["off"]: t["off"] + n] = params[t["name"]].detach().numpy().reshape(-1)
    out.tofile(d + "/torch_weights.bin")


def bench(argv):
    a = dict(arch="llama", n_embd=384, n_layer=6, n_head=6, n_head_kv=6, n_ff=1024, n_vocab=8192,
             n_ctx=1024, steps=3, threads=2, batch_tokens=1024)
    for kv in argv:
        k, v = kv.split("=")
        a[k] = v if k == "arch" else int(v)
    torch.set_num_threads(a["threads"])
    torch.manual_seed(0)
    c = dict(a, rope_base=10000.0, rms_eps=1e-5, lr=1e-3, lr_min=1e-4, warmup=0, weight_decay=0.1,
             beta1=0.9, beta2=0.95, adam_eps=1e-8, clip=1.0, n_seq=a["batch_tokens"] // a["n_ctx"])
    D, F_, V, hd = a["n_embd"], a["n_ff"], a["n_vocab"], a["n_embd"] // a["n_head"]
    Dkv = hd * a["n_head_kv"]
    shapes = {"token_embd.weight": (V, D), "output_norm.weight": (D,)}
    for l in range(a["n_layer"]):
        b = "blk.%d." % l
        shapes.update({b + "attn_norm.weight": (D,), b + "attn_q.weight": (D, D),
                       b + "attn_k.weight": (Dkv, D), b + "attn_v.weight": (Dkv, D),
                       b + "attn_output.weight": (D, D), b + "ffn_norm.weight": (D,),
                       b + "ffn_gate.weight": (F_, D), b + "ffn_up.weight": (F_, D),
                       b + "ffn_down.weight": (D, F_)})
        if a["arch"] == "qwen2":
            shapes.update({b + "attn_q.bias": (D,), b + "attn_k.bias": (Dkv,), b + "attn_v.bias": (Dkv,)})
    params = {}
    for n, s in shapes.items():
        t = torch.ones(s) if n.endswith("norm.weight") else torch.randn(s) * 0.02
        params[n] = t.requires_grad_(True)
    tensors = [{"name": n, "n_dims": len(s)} for n, s in shapes.items()]
    model = Model(c, params)
    opt = make_opt(c, params, tensors)
    N = a["batch_tokens"]
    T = a["n_ctx"]

    def batch():
        tok = torch.randint(0, V, (N,), dtype=torch.int32)
        pos = torch.arange(N, dtype=torch.int32) % T
        start = torch.zeros(N, dtype=torch.int32)
        target = torch.roll(tok, -1)
        weight = torch.ones(N)
        weight[T - 1::T] = 0
        return [(tok, pos, start, target, weight)]

    losses = [train_step(c, model, opt, params, batch(), 1, True)]  # warm-up, not timed
    t0 = time.perf_counter()
    for i in range(a["steps"]):
        losses.append(train_step(c, model, opt, params, batch(), i + 2, True))
    dt = time.perf_counter() - t0
    print(json.dumps({"bench": "torch", "torch": torch.__version__, "threads": a["threads"],
                      "steps": a["steps"], "seconds": round(dt, 3),
                      "tokens_per_s": round(N * a["steps"] / dt, 1),
                      "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4)}))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        torch.set_num_threads(1)
        check(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "bench":
        bench(sys.argv[2:])
    else:
        sys.stderr.write("usage: train_torch_ref.py check DIR | bench [key=value ...]\n")
        sys.exit(2)
