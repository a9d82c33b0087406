#!/usr/bin/env python3
"""Trains an EAGLE-1/2 draft head for a llama2.c checkpoint and writes a specdec head file
(format v1, include/specdec/models/eagle_head.hpp; docs/drafters/eagle.md).

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
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import llama_train as lt  # noqa: E402  (tools/common/llama_train.py: what the trainers share)

MAGIC = b"SPDEAGLE"
VERSION = 1


class Head(torch.nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        d = c["dim"]
        self.dim, self.n_heads, self.n_kv_heads, self.hidden = d, c["n_heads"], c["n_kv_heads"], hidden
        self.register_buffer("embedding", torch.tensor(c["embedding"]))
        self.register_buffer("classifier", torch.tensor(c["classifier"]))
        self.fc = torch.nn.Linear(2 * d, d, bias=True)
        self.layer = lt.LlamaLayer(d, hidden, c["n_heads"], c["n_kv_heads"])
        self.rms_out = torch.nn.Parameter(torch.tensor(c["rms_final"]).clone())
        if hidden == c["hidden"]:  # start from the target's last layer: a layer that already reads features
            self.layer.load(c["last_layer"])

    def ordered_parameters(self):
        """The trainable parameters in the order of the head's first version (one module: its norms,
        then fc, then the layer's matrices), which sets how the gradient norm is summed: the same
        arguments keep writing the same file."""
        layer = self.layer
        return [layer.rms_att, layer.rms_ffn, self.rms_out, self.fc.weight, self.fc.bias] + layer.matrices()

    def forward(self, tokens, features_in):
        B, T = tokens.shape
        x = self.fc(torch.cat((self.embedding[tokens], features_in), dim=-1))
        x = self.layer(x, lt.positions_of(B, T))
        return lt.rmsnorm(x, self.rms_out)

    def logits(self, feature):
        return feature @ self.classifier.T

    def write(self, path, vocab):
        layer = self.layer
        with open(path, "wb") as out:
            out.write(MAGIC)
            out.write(struct.pack("<6i", VERSION, self.dim, self.hidden, self.n_heads, self.n_kv_heads, vocab))
            for t in (self.fc.weight, self.fc.bias, layer.rms_att, layer.wq.weight, layer.wk.weight, layer.wv.weight,
                      layer.wo.weight, layer.rms_ffn, layer.w1.weight, layer.w2.weight, layer.w3.weight, self.rms_out):
                out.write(t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes())


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
    lt.add_common_arguments(ap, lr=3e-3, window=256)
    ap.add_argument("--w-cls", type=float, default=0.1, help="weight of the token loss (EAGLE: 0.1)")
    ap.add_argument("--noise", type=float, default=0.1, help="uniform noise on input features, times their std")
    ap.add_argument("--hidden", type=int, default=0, help="head FFN width (0: the target's)")
    lt.add_corpus_arguments(ap)
    args = ap.parse_args()

    rng = lt.seed_everything(args.seed, args.threads)
    c = lt.read_checkpoint(args.checkpoint)
    stories = lt.read_corpus(args.corpus, c["dim"], c["vocab"], args.max_tokens)
    held, train = lt.split_holdout(stories, args.holdout)
    feature_std = float(np.concatenate([f for _, f in train[:200]]).std())
    noise = args.noise * feature_std
    print(f"train.py: {c['dim']}-dim target, vocab {c['vocab']}, {len(train)} training stories "
          f"({sum(len(t) for t, _ in train)} tokens), {len(held)} held out; feature std {feature_std:.3f}", flush=True)

    head = Head(c, args.hidden or c["hidden"])
    gen = torch.Generator().manual_seed(args.seed)

    def step_losses(picks):
        loss, reg, cls, agree = losses(head, *lt.make_batch(train, picks, args.window), noise, args.w_cls, gen)
        return loss, f"feature loss {reg:.4f}  token loss {cls:.4f}  top-1 agrees {agree:.3f}"

    step, seconds = lt.train(head.ordered_parameters(), train, args, rng, step_losses)

    with torch.no_grad():
        picks = np.arange(len(held))
        _, reg, cls, agree = losses(head, *lt.make_batch(held, picks, args.window), 0.0, args.w_cls)
    print(f"done: {step} steps in {seconds:.0f} s; held out: feature loss {reg:.4f}, token loss "
          f"{cls:.4f}, head's top-1 = target's top-1 for {100 * agree:.1f}% of tokens", flush=True)
    head.write(args.out, c["vocab"])
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
