#!/usr/bin/env python3
"""Trains an EAGLE-1/2 draft head for a llama2.c checkpoint and writes a specdec head file
(format v1, include/specdec/models/eagle_head.hpp; docs/drafters.md "EAGLE-2").

Data: a corpus written by `specbench corpus --out DIR --features` with the same checkpoint:
DIR/tokens.bin (u32 ids, 0xFFFFFFFF after each story) and DIR/features.f32 (the target's feature,
its final-RMSNorm output, at every token, same order). The features come from the C++ target, so
the head learns exactly what EagleDrafter is told at run time; nothing here recomputes them.

Model: element k of a story is (t_k, f_{k-1}) (f_{-1} = 0); x = fc[emb(t_k); f_{k-1}] + b, one
Llama decoder layer (RoPE at position k), predicted feature = RMSNorm(x, rms_out). The embedding
and classifier are the target's, frozen, and not written to the head file. Loss (EAGLE paper):
SmoothL1(predicted feature, f_k) + w_cls * CE(target's softmax(classifier(f_k)), head's
softmax(classifier(predicted))), with uniform noise on the input features (the head reads its own
imperfect predictions when drafting deeper levels).

Reproducible: the same arguments (seed, threads included) give the same file. CPU only
(scripts/install-train-deps.sh installs Debian's python3-torch).

Example (the committed stories260K head; see tools/eagle/README.md):
  python3 tools/eagle/train.py --checkpoint ../shared/data/models/stories260K.bin \
      --corpus /tmp/corpus260K --out tools/eagle/heads/stories260K.eagle --minutes 20
"""
import argparse
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

MAGIC = b"SPDEAGLE"
VERSION = 1
SEPARATOR = 0xFFFFFFFF


def fail(message):
    sys.exit(f"train.py: {message}")


def read_checkpoint(path):
    """The llama2.c checkpoint's shape, embedding, classifier, final norm and last layer."""
    raw = np.fromfile(path, dtype="<f4")
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = struct.unpack("<7i", open(path, "rb").read(28))
    shared = vocab > 0
    vocab = abs(vocab)
    kv_dim = dim // n_heads * n_kv_heads
    offset = 7  # floats: the header is 7 int32

    def take(*shape):
        nonlocal offset
        n = int(np.prod(shape))
        if offset + n > raw.size:
            fail(f"checkpoint '{path}' is truncated")
        a = raw[offset:offset + n].reshape(shape)
        offset += n
        return a

    c = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads, vocab=vocab,
             seq_len=seq_len)
    L = n_layers
    c["embedding"] = take(vocab, dim)
    rms_att = take(L, dim)
    wq = take(L, dim, dim)
    wk = take(L, kv_dim, dim)
    wv = take(L, kv_dim, dim)
    wo = take(L, dim, dim)
    rms_ffn = take(L, dim)
    w1 = take(L, hidden, dim)
    w2 = take(L, dim, hidden)
    w3 = take(L, hidden, dim)
    c["rms_final"] = take(dim)
    take(seq_len, dim // n_heads // 2)  # legacy RoPE tables
    take(seq_len, dim // n_heads // 2)
    c["classifier"] = c["embedding"] if shared else take(vocab, dim)
    if offset != raw.size:
        fail(f"checkpoint '{path}' has {raw.size - offset} trailing floats")
    c["last_layer"] = dict(rms_att=rms_att[-1], wq=wq[-1], wk=wk[-1], wv=wv[-1], wo=wo[-1], rms_ffn=rms_ffn[-1],
                           w1=w1[-1], w2=w2[-1], w3=w3[-1])
    return c


def read_corpus(directory, dim, vocab, max_tokens):
    """Stories as (tokens int64 array, features float32 [n][dim]) pairs."""
    tokens = np.fromfile(os.path.join(directory, "tokens.bin"), dtype="<u4")
    features = np.memmap(os.path.join(directory, "features.f32"), dtype="<f4", mode="r")
    ids = tokens[tokens != SEPARATOR]
    if features.size != ids.size * dim:
        fail(f"features.f32 has {features.size} floats, expected {ids.size} tokens x dim {dim} "
             "(was the corpus written with --features by this checkpoint?)")
    if ids.size and int(ids.max()) >= vocab:
        fail(f"tokens.bin has token {int(ids.max())}, outside the checkpoint's vocabulary of {vocab}")
    features = features.reshape(ids.size, dim)
    stories, row = [], 0
    ends = np.flatnonzero(tokens == SEPARATOR)
    start = 0
    for end in ends:
        n = int(end - start)
        if n >= 2:
            stories.append((tokens[start:end].astype(np.int64), np.asarray(features[row:row + n])))
        row += n
        start = end + 1
        if row >= max_tokens:
            break
    return stories


def rmsnorm(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))


class Head(torch.nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        d, kv = c["dim"], c["dim"] // c["n_heads"] * c["n_kv_heads"]
        self.dim, self.n_heads, self.n_kv_heads, self.hidden = d, c["n_heads"], c["n_kv_heads"], hidden
        self.register_buffer("embedding", torch.tensor(c["embedding"]))
        self.register_buffer("classifier", torch.tensor(c["classifier"]))
        self.fc = torch.nn.Linear(2 * d, d, bias=True)
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.wq, self.wk, self.wv, self.wo = lin(d, d), lin(d, kv), lin(d, kv), lin(d, d)
        self.w1, self.w2, self.w3 = lin(d, hidden), lin(hidden, d), lin(d, hidden)
        self.rms_att = torch.nn.Parameter(torch.ones(d))
        self.rms_ffn = torch.nn.Parameter(torch.ones(d))
        self.rms_out = torch.nn.Parameter(torch.tensor(c["rms_final"]).clone())
        last = c["last_layer"]
        if hidden == c["hidden"]:  # start from the target's last layer: a layer that already reads features
            with torch.no_grad():
                for name in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
                    getattr(self, name).weight.copy_(torch.tensor(last[name]))
                self.rms_att.copy_(torch.tensor(last["rms_att"]))
                self.rms_ffn.copy_(torch.tensor(last["rms_ffn"]))
        hs = d // self.n_heads
        freq = 1.0 / torch.pow(torch.tensor(10000.0), torch.arange(0, hs, 2, dtype=torch.float32) / hs)
        self.register_buffer("freq", freq)

    def rope(self, x, positions):  # x [B, T, heads, hs]: pairs (2p, 2p + 1) rotated by position * freq_p
        angle = positions[:, :, None].float() * self.freq  # [B, T, hs/2]
        c, s = torch.cos(angle)[:, :, None, :], torch.sin(angle)[:, :, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)

    def forward(self, tokens, features_in):
        B, T = tokens.shape
        d, H, KV = self.dim, self.n_heads, self.n_kv_heads
        hs = d // H
        x = self.fc(torch.cat((self.embedding[tokens], features_in), dim=-1))
        positions = torch.arange(T)[None, :].expand(B, T)
        h = rmsnorm(x, self.rms_att)
        q = self.rope(self.wq(h).view(B, T, H, hs), positions)
        k = self.rope(self.wk(h).view(B, T, KV, hs), positions)
        v = self.wv(h).view(B, T, KV, hs)
        k = k.repeat_interleave(H // KV, dim=2)
        v = v.repeat_interleave(H // KV, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, T, hs]
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = F.softmax(scores.masked_fill(causal, float("-inf")), dim=-1) @ v  # (Debian's torch 1.13: no SDPA)
        x = x + self.wo(att.transpose(1, 2).reshape(B, T, d))
        h = rmsnorm(x, self.rms_ffn)
        x = x + self.w2(F.silu(self.w1(h)) * self.w3(h))
        return rmsnorm(x, self.rms_out)

    def logits(self, feature):
        return feature @ self.classifier.T

    def write(self, path, vocab):
        with open(path, "wb") as out:
            out.write(MAGIC)
            out.write(struct.pack("<6i", VERSION, self.dim, self.hidden, self.n_heads, self.n_kv_heads, vocab))
            for t in (self.fc.weight, self.fc.bias, self.rms_att, self.wq.weight, self.wk.weight, self.wv.weight,
                      self.wo.weight, self.rms_ffn, self.w1.weight, self.w2.weight, self.w3.weight, self.rms_out):
                out.write(t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes())


def make_batch(stories, picks, window):
    """Stories picks[i], each cut to `window` tokens from its start (positions are absolute)."""
    T = min(window, max(len(stories[i][0]) for i in picks))
    dim = stories[picks[0]][1].shape[1]
    tokens = np.zeros((len(picks), T), dtype=np.int64)
    feats = np.zeros((len(picks), T, dim), dtype=np.float32)
    mask = np.zeros((len(picks), T), dtype=np.float32)
    for b, i in enumerate(picks):
        t, f = stories[i]
        n = min(T, len(t))
        tokens[b, :n], feats[b, :n], mask[b, :n] = t[:n], f[:n], 1.0
    return torch.from_numpy(tokens), torch.from_numpy(feats), torch.from_numpy(mask)


def losses(head, tokens, feats, mask, noise, w_cls, generator=None):
    """Element k = (t_k, f_{k-1}), predicting f_k (and through it t_{k+1})."""
    prev = torch.cat((torch.zeros_like(feats[:, :1]), feats[:, :-1]), dim=1)
    if noise > 0:
        prev = prev + (torch.rand(prev.shape, generator=generator) * 2 - 1) * noise
    predicted = head(tokens, prev)
    m = mask[..., None]
    reg = (F.smooth_l1_loss(predicted, feats, reduction="none") * m).sum() / (m.sum() * feats.shape[-1])
    with torch.no_grad():
        p = F.softmax(head.logits(feats), dim=-1)
    logq = F.log_softmax(head.logits(predicted), dim=-1)
    cls = -((p * logq).sum(-1) * mask).sum() / mask.sum()
    agree = (((logq.argmax(-1) == p.argmax(-1)).float() * mask).sum() / mask.sum()).item()
    return reg + w_cls * cls, reg.item(), cls.item(), agree


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="llama2.c checkpoint (.bin) the head drafts for")
    ap.add_argument("--corpus", required=True, help="directory of `specbench corpus --features` with that checkpoint")
    ap.add_argument("--out", required=True, help="head file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps (0: until --minutes)")
    ap.add_argument("--minutes", type=float, default=20.0, help="time limit (ignored with --steps)")
    ap.add_argument("--batch", type=int, default=16, help="stories per step")
    ap.add_argument("--window", type=int, default=256, help="tokens per story read (from its start)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--w-cls", type=float, default=0.1, help="weight of the token loss (EAGLE: 0.1)")
    ap.add_argument("--noise", type=float, default=0.1, help="uniform noise on input features, times their std")
    ap.add_argument("--hidden", type=int, default=0, help="head FFN width (0: the target's)")
    ap.add_argument("--max-tokens", type=int, default=2_000_000, help="corpus tokens read at most")
    ap.add_argument("--holdout", type=int, default=64, help="stories kept out of training, to report on")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    c = read_checkpoint(args.checkpoint)
    stories = read_corpus(args.corpus, c["dim"], c["vocab"], args.max_tokens)
    if len(stories) <= args.holdout:
        fail(f"the corpus has {len(stories)} stories, not more than --holdout {args.holdout}")
    held, train = stories[:args.holdout], stories[args.holdout:]
    feature_std = float(np.concatenate([f for _, f in train[:200]]).std())
    noise = args.noise * feature_std
    print(f"train.py: {c['dim']}-dim target, vocab {c['vocab']}, {len(train)} training stories "
          f"({sum(len(t) for t, _ in train)} tokens), {len(held)} held out; feature std {feature_std:.3f}", flush=True)

    head = Head(c, args.hidden or c["hidden"])
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    start = time.time()
    step, last_print = 0, 0.0

    def done():
        return step >= args.steps if args.steps else time.time() - start >= 60 * args.minutes

    def progress():
        return step / args.steps if args.steps else (time.time() - start) / (60 * args.minutes)

    while not done():
        lr = args.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress())))
        for g in opt.param_groups:
            g["lr"] = lr
        picks = rng.integers(0, len(train), size=args.batch)
        loss, reg, cls, agree = losses(head, *make_batch(train, picks, args.window), noise, args.w_cls, gen)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        step += 1
        if time.time() - last_print > 30 or step == 1:
            last_print = time.time()
            print(f"step {step:6d}  {time.time() - start:7.1f} s  lr {lr:.2e}  feature loss {reg:.4f}  "
                  f"token loss {cls:.4f}  top-1 agrees {agree:.3f}", flush=True)

    with torch.no_grad():
        picks = np.arange(len(held))
        _, reg, cls, agree = losses(head, *make_batch(held, picks, args.window), 0.0, args.w_cls)
    print(f"done: {step} steps in {time.time() - start:.0f} s; held out: feature loss {reg:.4f}, token loss "
          f"{cls:.4f}, head's top-1 = target's top-1 for {100 * agree:.1f}% of tokens", flush=True)
    head.write(args.out, c["vocab"])
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
