"""The llama2.c architecture in PyTorch, decoding with specdec's drafters and verifier.

    python3 examples/python/llama2c.py [--task stories] [--max-prompts N] [--drafters pld,casd]

loads stories260K (llama2.c checkpoint, from $SPECDEC_DATA or ../shared/data), decodes every
prompt of specbench's task plainly and speculatively with the same model, checks the outputs are
identical and prints τ and tokens/s of both (docs/python.md).

The model runs a tree forward: every node attends to the KV cache and to its ancestors (the
tree's mask). Exactness: node i of a tree must get the bits a one-token forward at its position
gets. So each node attends to exactly the keys a one-token forward would, in position order
(the cache, then its ancestors by depth), and nodes of one depth are batched together: only the
matrix products see a batch of varying size. Whether PyTorch's CPU products are batch-invariant
depends on its BLAS and threads: `batch_invariant()` checks it on this machine; where they are
not (or with `--row-by-row`), every product is computed one row at a time, as a one-token
forward does.
"""
import argparse
import math
import os
import struct
import time
from pathlib import Path

import numpy as np
import torch
import torch.utils.mkldnn

import specdec


class Llama2c:
    """A llama2.c checkpoint (legacy format: 7 int32 header, fp32 weights) with a KV cache."""

    def __init__(self, checkpoint, row_by_row=False, extra_slots=65, onednn=False):
        raw = checkpoint if isinstance(checkpoint, bytes) else Path(checkpoint).read_bytes()
        dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("7i", raw[:28])
        weights = torch.from_numpy(np.frombuffer(raw, dtype=np.float32, offset=28).copy())
        self.dim, self.layers, self.heads, self.kv_heads = dim, layers, heads, kv_heads
        self.vocab, self.seq_len, self.head_size = abs(vocab), seq_len, dim // heads
        kv_dim, hs = kv_heads * self.head_size, self.head_size
        shapes = [("emb", (self.vocab, dim)), ("rms_att", (layers, dim)), ("wq", (layers, dim, dim)),
                  ("wk", (layers, kv_dim, dim)), ("wv", (layers, kv_dim, dim)), ("wo", (layers, dim, dim)),
                  ("rms_ffn", (layers, dim)), ("w1", (layers, hidden, dim)), ("w2", (layers, dim, hidden)),
                  ("w3", (layers, hidden, dim)), ("rms_final", (dim,)), ("rope_tables", (2, seq_len, hs // 2))]
        offset = 0
        for name, shape in shapes:
            size = math.prod(shape)
            setattr(self, name, weights[offset:offset + size].view(shape))
            offset += size
        self.wcls = self.emb if vocab > 0 else weights[offset:offset + self.vocab * dim].view(self.vocab, dim)
        freq = 1.0 / 10000.0 ** (torch.arange(0, hs, 2, dtype=torch.float32) / hs)
        angle = torch.outer(torch.arange(seq_len, dtype=torch.float32), freq)
        self.cos, self.sin = torch.cos(angle), torch.sin(angle)
        self.row_by_row = row_by_row
        # oneDNN's inner product reads each weight once for all rows (Debian's PyTorch multiplies
        # through the reference BLAS, whose cost grows with the rows).
        self.onednn = {}
        if onednn:
            for w in [getattr(self, n)[l] for n in ("wq", "wk", "wv", "wo", "w1", "w2", "w3")
                      for l in range(layers)] + [self.wcls]:
                linear = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
                linear.weight.data = w
                self.onednn[w.data_ptr()] = torch.utils.mkldnn.to_mkldnn(linear)
        # Tree nodes take cache slots base .. base + n - 1 until commit keeps the accepted ones.
        self.k = torch.zeros(layers, seq_len + extra_slots, kv_heads, hs)
        self.v = torch.zeros_like(self.k)

    @staticmethod
    def synthetic(dim, hidden, layers, heads, kv_heads, vocab, seq_len, seed=0):
        """A checkpoint of this shape with random weights (for timing a memory-bound shape)."""
        head = struct.pack("7i", dim, hidden, layers, heads, kv_heads, vocab, seq_len)
        kv_dim = kv_heads * (dim // heads)
        count = vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv_dim * dim + 3 * hidden * dim) + dim \
            + seq_len * (dim // heads)
        weights = np.random.default_rng(seed).standard_normal(count, dtype=np.float32) * np.float32(0.02)
        return head + weights.tobytes()

    def product(self, x, w):
        if self.onednn:
            return self.onednn[w.data_ptr()](x.to_mkldnn()).to_dense()
        return x @ w.T

    def linear(self, x, w):
        if self.row_by_row:
            return torch.cat([self.product(x[i:i + 1], w) for i in range(x.shape[0])])
        return self.product(x, w)

    def rms(self, x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w

    def rope(self, x, positions):  # llama2.c rotates pairs (2i, 2i + 1) of each head
        x = x.view(x.shape[0], -1, self.head_size // 2, 2)
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]
        a, b = x[..., 0], x[..., 1]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(1)

    def forward(self, tokens, depths, mask, base):
        """Logits [n, vocab] after each tree node; node i sits at base + depths[i] and its K/V in
        cache slot base + i. mask[i, j]: node j is node i or one of its ancestors."""
        n = len(tokens)
        tokens, positions = torch.as_tensor(tokens, dtype=torch.long), torch.as_tensor(depths, dtype=torch.long) + base
        # Per depth: its nodes and, for each, the cache slots of its keys in position order.
        groups = []
        for d in range(int(depths.max()) + 1):
            nodes = np.flatnonzero(depths == d)
            ancestors = np.nonzero(mask[nodes])[1].reshape(len(nodes), d + 1) + base
            slots = np.concatenate([np.broadcast_to(np.arange(base), (len(nodes), base)), ancestors], 1)
            groups.append((torch.from_numpy(nodes), torch.from_numpy(slots)))
        x = self.emb[tokens]
        rep = self.heads // self.kv_heads  # query heads per K/V head
        for l in range(self.layers):
            h = self.rms(x, self.rms_att[l])
            q = self.rope(self.linear(h, self.wq[l]), positions).view(n, self.kv_heads, rep, self.head_size)
            self.k[l, base:base + n] = self.rope(self.linear(h, self.wk[l]), positions).view(n, self.kv_heads, -1)
            self.v[l, base:base + n] = self.linear(h, self.wv[l]).view(n, self.kv_heads, -1)
            out = torch.empty(n, self.kv_heads, rep, self.head_size)
            for nodes, slots in groups:
                k = self.k[l][slots].permute(0, 2, 3, 1)  # [g, kv heads, hs, keys]
                v = self.v[l][slots].transpose(1, 2)      # [g, kv heads, keys, hs]
                out[nodes] = torch.softmax((q[nodes] @ k) / math.sqrt(self.head_size), -1) @ v
            x = x + self.linear(out.view(n, self.dim), self.wo[l])
            h = self.rms(x, self.rms_ffn[l])
            x = x + self.linear(torch.nn.functional.silu(self.linear(h, self.w1[l])) * self.linear(h, self.w3[l]), self.w2[l])
        self.features = self.rms(x, self.rms_final)  # the classifier's input: EAGLE's and DReSD's features
        return self.linear(self.features, self.wcls)

    def keep(self, base, path):
        """Commit: the K/V of tree nodes `path` (root first) move to slots base, base + 1, ..."""
        src = torch.as_tensor(np.asarray(path), dtype=torch.long) + base
        self.k[:, base:base + len(src)] = self.k[:, src]
        self.v[:, base:base + len(src)] = self.v[:, src]

    def prefill(self, tokens):
        """The cache holds exactly `tokens` (a chain forward, every node kept)."""
        n = len(tokens)
        self.features = torch.empty(0, self.dim)
        if n:
            self.forward(tokens, np.arange(n), np.tri(n, dtype=bool), 0)


STOP = (specdec.Tokenizer.bos, specdec.Tokenizer.eos)


def finish(tokens, max_new):
    """The output up to max_new tokens, cut after the first stop token."""
    out = []
    for t in tokens[:max_new]:
        out.append(int(t))
        if t in STOP:
            break
    return out


def plain(model, prompt, max_new):
    model.prefill(prompt[:-1])
    out, root = [], prompt[-1]
    while len(out) < max_new and (not out or out[-1] not in STOP):
        base = len(prompt) - 1 + len(out)
        root = int(model.forward([root], np.zeros(1, np.int64), np.ones((1, 1), bool), base)[0].argmax())
        out.append(root)
    return out


def speculative(model, decoder, prompt, max_new):
    model.prefill(prompt[:-1])
    decoder.begin(prompt, features=model.features)  # features: read by EAGLE and DReSD only
    out = []
    while len(out) < max_new and not any(t in STOP for t in out):
        tree = decoder.draft()
        logits = model.forward(tree.tokens, tree.depths, tree.mask, tree.base_position)
        verdict = decoder.verify(logits, features=model.features)
        model.keep(tree.base_position, verdict.path)
        out += decoder.commit().tolist()
    decoder.end()
    return finish(out, max_new)


ROOT = Path(__file__).resolve().parents[2]


def drafter(name, checkpoint):
    """A drafter by specbench's name; eagle uses the stories260K head committed in tools/eagle."""
    d = specdec.drafters
    if name == "eagle":
        return d.Eagle(ROOT / "tools" / "eagle" / "heads" / "stories260K.eagle", checkpoint)
    if name == "draft_model":
        return d.DraftModel(ROOT / "tools" / "draft_model" / "models" / "stories260K-draft.bin")
    return {"pld": d.Pld, "casd": d.Casd, "casd_prompt": d.CasdPrompt, "tree": d.ContextTree,
            "tree_history": d.HistoryTree}[name]()


def batch_invariant(model, rows=65):
    """Whether this PyTorch gives row 0 of every product of the model's shapes the same bits for
    1 .. rows rows (if not, use row_by_row)."""
    g = torch.Generator().manual_seed(0)
    for w in (model.wq[0], model.wk[0], model.w1[0], model.w2[0], model.wcls):
        x = torch.randn(rows, w.shape[1], generator=g)
        one = model.product(x[:1], w)
        if any(not torch.equal(model.product(x[:m], w)[:1], one) for m in range(2, rows + 1)):
            return False
    return True


def data_dir():
    return Path(os.environ.get("SPECDEC_DATA") or ROOT.parent / "shared" / "data")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(data_dir() / "models" / "stories260K.bin"))
    p.add_argument("--tokenizer", default=str(data_dir() / "models" / "tok512.bin"))
    p.add_argument("--task", default="stories")
    p.add_argument("--max-prompts", type=int, default=0, help="0: every prompt of the task")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--synthetic", metavar="DIM,HIDDEN,LAYERS,HEADS,KV_HEADS,VOCAB,SEQ_LEN",
                   help="random weights of this shape instead of --model (e.g. stories110M's: "
                        "768,2048,12,12,12,32000,1024), for a memory-bound forward")
    p.add_argument("--onednn", action="store_true", help="products through oneDNN (weights read once per forward)")
    p.add_argument("--drafters", default="pld,casd,tree")
    p.add_argument("--budget", type=int, default=16)
    p.add_argument("--row-by-row", action="store_true",
                   help="every product one row at a time (exact on any BLAS; on by itself where products are not "
                        "batch-invariant)")
    a = p.parse_args()
    torch.set_num_threads(1)
    checkpoint = Llama2c.synthetic(*map(int, a.synthetic.split(","))) if a.synthetic else a.model
    model = Llama2c(checkpoint, a.row_by_row, extra_slots=a.budget + 1, onednn=a.onednn)
    tokenizer = specdec.Tokenizer(a.tokenizer)
    prompts = specdec.tasks()[a.task][: a.max_prompts or None]
    drafters = [drafter(name, a.model) for name in a.drafters.split(",")]
    decoder = specdec.Decoder(model.vocab, drafters, budget=a.budget, max_positions=model.seq_len)
    invariant = batch_invariant(model)
    model.row_by_row = a.row_by_row or not invariant
    print(f"products batch-invariant on this machine: {invariant}; row by row: {model.row_by_row}; "
          f"oneDNN: {a.onednn}")
    seconds, tokens, committed, steps, identical = [0.0, 0.0], 0, 0, 0, 0
    for i, text in enumerate(prompts):
        prompt = tokenizer.encode(text).tolist()
        max_new = min(a.max_new_tokens, model.seq_len - len(prompt))
        t0 = time.perf_counter()
        want = plain(model, prompt, max_new)
        t1 = time.perf_counter()
        got = speculative(model, decoder, prompt, max_new)
        t2 = time.perf_counter()
        seconds[0] += t1 - t0
        seconds[1] += t2 - t1
        tokens += len(want)
        steps += decoder.stats.steps
        committed += decoder.stats.tokens
        identical += got == want
        if got != want:
            print(f"prompt {i}: speculative output differs from plain decoding at token "
                  f"{next(k for k, (x, y) in enumerate(zip(got + [-1], want + [-1])) if x != y)}")
    print(f"{a.task}: {identical}/{len(prompts)} prompts identical to plain greedy decoding; "
          f"tau {committed / steps:.3f} (tokens per forward, bonus included); "
          f"plain {tokens / seconds[0]:.1f} tokens/s, speculative {tokens / seconds[1]:.1f} tokens/s "
          f"({seconds[0] / seconds[1]:.2f}x), drafters {a.drafters}, budget {a.budget}")
    return 0 if identical == len(prompts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
