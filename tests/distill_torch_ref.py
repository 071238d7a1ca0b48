#!/usr/bin/env python3
"""distill_torch_ref.py -- tern distill's per-row loss in PyTorch, for tests/test_distill_torch.c.

  check DIR...  for each DIR, reads DIR/case.json (V, k, rows, tau, w_kd, w_ce, scale) and DIR/case.bin (float32
              logits (rows, V), int32 target (rows), float32 weight (rows), int32 ids (rows, k),
              float32 logp (rows, k), float32 tail (rows)); writes DIR/torch.bin: float64 grad
              (rows, V), kl (rows), ce (rows), from autograd of

  L = scale * sum_r w_r (w_kd tau^2 KL_r + w_ce CE_r)
  KL_r = sum_i q_i (logp_i - log p_tau[ids_i]) + q_t (log q_t - log p_tau(outside ids))
  CE_r = -log softmax(s)[target]

written independently of src/train/distill_loss.c (log_softmax, gather, a masked logsumexp for
the student's tail), in float64.
"""
import json
import sys

import numpy as np
import torch


def check(d):
    c = json.load(open(d + "/case.json"))
    V, k, R = c["V"], c["k"], c["rows"]
    raw = open(d + "/case.bin", "rb").read()
    o = 0

    def take(dtype, n):
        nonlocal o
        a = np.frombuffer(raw, dtype=dtype, count=n, offset=o)
        o += a.nbytes
        return a

    logits = take(np.float32, R * V).reshape(R, V)
    target = take(np.int32, R)
    weight = take(np.float32, R)
    ids = take(np.int32, R * k).reshape(R, k)
    logp = take(np.float32, R * k).reshape(R, k)
    tail = take(np.float32, R)
    tau, w_kd, w_ce, scale = c["tau"], c["w_kd"], c["w_ce"], c["scale"]

    s = torch.tensor(logits.astype(np.float64), requires_grad=True)
    ids_t = torch.tensor(ids.astype(np.int64))
    q = torch.exp(torch.tensor(logp.astype(np.float64)))
    qt = torch.tensor(tail.astype(np.float64))
    lp = torch.log_softmax(s / tau, dim=1)
    lpk = lp.gather(1, ids_t)
    outside = torch.ones(R, V, dtype=torch.bool)
    outside.scatter_(1, ids_t, False)
    z = (s / tau).masked_fill(~outside, float("-inf"))
    log_tail = torch.logsumexp(z, dim=1) - torch.logsumexp(s / tau, dim=1)
    kl = (q * (torch.log(q) - lpk)).sum(1)
    has_tail = qt > 0
    tail_term = torch.where(has_tail, qt * (torch.log(torch.where(has_tail, qt, torch.ones_like(qt)))
                                            - torch.where(has_tail, log_tail, torch.zeros_like(log_tail))),
                            torch.zeros_like(qt))
    kl = kl + tail_term
    ce = torch.nn.functional.cross_entropy(s, torch.tensor(target.astype(np.int64)), reduction="none")
    w = torch.tensor(weight.astype(np.float64))
    loss = scale * (w * (w_kd * tau * tau * kl + w_ce * ce)).sum()
    loss.backward()
    out = np.concatenate([s.grad.numpy().reshape(-1), kl.detach().numpy(), ce.detach().numpy()])
    out.astype(np.float64).tofile(d + "/torch.bin")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        torch.set_num_threads(1)
        for d in sys.argv[2:]:  # one process for every case: importing torch is the slow part
            check(d)
    else:
        sys.stderr.write("usage: distill_torch_ref.py check DIR...\n")
        sys.exit(2)
