"""What specdec's Python trainers share (tools/eagle/train.py, tools/draft_model/train.py): reading a
llama2.c checkpoint and a `specbench corpus --features` corpus, a Llama decoder layer in torch that
computes what include/specdec/models/llama_layer.hpp computes, writing a llama2.c checkpoint, and
the training loop (seeding and threads, batches of stories read from their start, AdamW with a
cosine learning rate and gradient clipping, progress lines, --steps or --minutes).

CPU only, Debian's python3-torch and python3-numpy (scripts/install-train-deps.sh). A trainer
imports it after putting this directory on sys.path:
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
  import llama_train
"""
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

SEPARATOR = 0xFFFFFFFF  # after each story in tokens.bin
LAYER_MATRICES = ("wq", "wk", "wv", "wo", "w1", "w2", "w3")  # a layer's projections, file order


def fail(message):
    sys.exit(f"{os.path.basename(sys.argv[0])}: {message}")


def read_checkpoint(path):
    """A llama2.c checkpoint (include/specdec/models/llama2c_model.hpp): its shape, embedding,
    classifier (the embedding when shared), final norm and every layer (dicts of numpy arrays
    named as LlamaLayer's weights); c["last_layer"] is c["layers"][-1]."""
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
             seq_len=seq_len, shared_classifier=shared)
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
    c["layers"] = [dict(rms_att=rms_att[l], wq=wq[l], wk=wk[l], wv=wv[l], wo=wo[l], rms_ffn=rms_ffn[l], w1=w1[l],
                        w2=w2[l], w3=w3[l]) for l in range(L)]
    c["last_layer"] = c["layers"][-1]
    return c


def write_checkpoint(path, embedding, layers, rms_final, n_heads, n_kv_heads, seq_len, classifier=None):
    """Writes a llama2.c checkpoint in the legacy layout Llama2cModel::load reads: the 7-int32
    header (vocab negative when `classifier` is given, i.e. not shared), the embedding, each field
    of every layer in turn, the final norm, the RoPE tables (cos, sin [seq_len][head_size / 2], as
    llama2.c's legacy export writes them; specdec skips them), then the classifier if not shared.
    Tensors are float32 torch tensors or numpy arrays; `layers` are LlamaLayer modules."""
    as_np = lambda t: (t.detach().to(torch.float32).contiguous().numpy() if torch.is_tensor(t)
                       else np.asarray(t, dtype=np.float32))
    embedding = as_np(embedding)
    vocab, dim = embedding.shape
    hidden = layers[0].w1.weight.shape[0]
    hs = dim // n_heads
    with open(path, "wb") as out:
        out.write(struct.pack("<7i", dim, hidden, len(layers), n_heads, n_kv_heads,
                              vocab if classifier is None else -vocab, seq_len))
        write = lambda a: out.write(as_np(a).astype("<f4").tobytes())
        write(embedding)
        for name in ("rms_att",) + LAYER_MATRICES[:4] + ("rms_ffn",) + LAYER_MATRICES[4:]:
            for layer in layers:
                write(getattr(layer, name) if name.startswith("rms") else getattr(layer, name).weight)
        write(rms_final)
        angle = np.arange(seq_len, dtype=np.float64)[:, None] * rope_frequencies(hs).double().numpy()[None, :]
        write(np.cos(angle))
        write(np.sin(angle))
        if classifier is not None:
            write(classifier)


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


def split_holdout(stories, holdout):
    """(held out, training): the first `holdout` stories are kept out of training."""
    if len(stories) <= holdout:
        fail(f"the corpus has {len(stories)} stories, not more than --holdout {holdout}")
    return stories[:holdout], stories[holdout:]


def rmsnorm(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))


def rope_frequencies(head_size):
    """freq_p = 10000^(-2p / head_size), p < head_size / 2 (float32, as llama_layer.hpp)."""
    return 1.0 / torch.pow(torch.tensor(10000.0), torch.arange(0, head_size, 2, dtype=torch.float32) / head_size)


def rope(x, positions, freq):
    """x [B, T, heads, hs]: pairs (2p, 2p + 1) rotated by position * freq_p."""
    angle = positions[:, :, None].float() * freq  # [B, T, hs/2]
    c, s = torch.cos(angle)[:, :, None, :], torch.sin(angle)[:, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


class LlamaLayer(torch.nn.Module):
    """One Llama decoder layer (pre-norm attention with RoPE and grouped-query heads, then a SwiGLU
    feed-forward), causal over the T positions of each sequence. Weights as a llama2.c checkpoint
    names them; projections [out][in] as torch.nn.Linear keeps them. Created in the order wq, wk,
    wv, wo, w1, w2, w3 (their random initialisation draws from torch's generator in that order)."""

    def __init__(self, dim, hidden, n_heads, n_kv_heads):
        super().__init__()
        kv = dim // n_heads * n_kv_heads
        self.dim, self.hidden, self.n_heads, self.n_kv_heads = dim, hidden, n_heads, n_kv_heads
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.wq, self.wk, self.wv, self.wo = lin(dim, dim), lin(dim, kv), lin(dim, kv), lin(dim, dim)
        self.w1, self.w2, self.w3 = lin(dim, hidden), lin(hidden, dim), lin(dim, hidden)
        self.rms_att = torch.nn.Parameter(torch.ones(dim))
        self.rms_ffn = torch.nn.Parameter(torch.ones(dim))
        self.register_buffer("freq", rope_frequencies(dim // n_heads))

    def load(self, weights):
        """Copies a layer of read_checkpoint (same shape) into this one."""
        with torch.no_grad():
            for name in LAYER_MATRICES:
                getattr(self, name).weight.copy_(torch.tensor(weights[name]))
            self.rms_att.copy_(torch.tensor(weights["rms_att"]))
            self.rms_ffn.copy_(torch.tensor(weights["rms_ffn"]))

    def matrices(self):
        return [getattr(self, name).weight for name in LAYER_MATRICES]

    def forward(self, x, positions):
        """x [B, T, dim] (the residual stream), positions [B, T]: the stream after the layer."""
        B, T, d = x.shape
        H, KV = self.n_heads, self.n_kv_heads
        hs = d // H
        h = rmsnorm(x, self.rms_att)
        q = rope(self.wq(h).view(B, T, H, hs), positions, self.freq)
        k = rope(self.wk(h).view(B, T, KV, hs), positions, self.freq)
        v = self.wv(h).view(B, T, KV, hs)
        if H != KV:  # grouped-query: each key/value head serves H / KV query heads
            k = k.repeat_interleave(H // KV, dim=2)
            v = v.repeat_interleave(H // KV, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, T, hs]
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = F.softmax(scores.masked_fill(causal, float("-inf")), dim=-1) @ v  # (Debian's torch 1.13: no SDPA)
        x = x + self.wo(att.transpose(1, 2).reshape(B, T, d))
        h = rmsnorm(x, self.rms_ffn)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def positions_of(B, T):
    """Absolute positions 0..T-1 of B sequences read from their start."""
    return torch.arange(T)[None, :].expand(B, T)


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


def add_common_arguments(ap, lr, window, batch=16, minutes=20.0):
    """The arguments every trainer takes (checkpoint, corpus, output, seed, threads, how long,
    batch, window, learning rate, corpus size, hold-out)."""
    ap.add_argument("--checkpoint", required=True, help="llama2.c checkpoint (.bin) of the target")
    ap.add_argument("--corpus", required=True, help="directory of `specbench corpus --features` with that checkpoint")
    ap.add_argument("--out", required=True, help="file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps (0: until --minutes)")
    ap.add_argument("--minutes", type=float, default=minutes, help="time limit (ignored with --steps)")
    ap.add_argument("--batch", type=int, default=batch, help="stories per step")
    ap.add_argument("--window", type=int, default=window, help="tokens per story read (from its start)")
    ap.add_argument("--lr", type=float, default=lr)


def add_corpus_arguments(ap):
    ap.add_argument("--max-tokens", type=int, default=2_000_000, help="corpus tokens read at most")
    ap.add_argument("--holdout", type=int, default=64, help="stories kept out of training, to report on")


def seed_everything(seed, threads):
    """Seeds torch's generator, sets its threads; returns the numpy generator that picks batches."""
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    return np.random.default_rng(seed)


def train(params, train_stories, args, rng, step_losses, clip=0.5, weight_decay=0.0, warmup=0):
    """The training loop: until --steps steps (or --minutes), a batch of --batch stories picked by
    `rng`, `step_losses(picks)` -> (loss tensor, progress text), AdamW at a cosine learning rate
    from --lr to 0 (after a linear warm-up over the first `warmup` steps), gradients clipped to norm
    `clip`; a progress line every 30 s. `params` in a fixed order (it is the order in which the
    gradient norm is summed). Returns (steps, seconds)."""
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=weight_decay)
    start = time.time()
    step, last_print = 0, 0.0

    def done():
        return step >= args.steps if args.steps else time.time() - start >= 60 * args.minutes

    def progress():
        return step / args.steps if args.steps else (time.time() - start) / (60 * args.minutes)

    while not done():
        lr = args.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress())))
        if step < warmup:
            lr *= (step + 1) / warmup
        for g in opt.param_groups:
            g["lr"] = lr
        picks = rng.integers(0, len(train_stories), size=args.batch)
        loss, text = step_losses(picks)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        step += 1
        if time.time() - last_print > 30 or step == 1:
            last_print = time.time()
            print(f"step {step:6d}  {time.time() - start:7.1f} s  lr {lr:.2e}  {text}", flush=True)
    return step, time.time() - start
