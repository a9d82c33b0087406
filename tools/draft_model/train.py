#!/usr/bin/env python3
"""Distils a small Llama draft model from a llama2.c checkpoint and writes it as a llama2.c
checkpoint with the target's vocabulary, which Llama2cTarget loads (the draft of staged
speculative decoding).

Data: a corpus written by `specbench corpus --out DIR --features` with the target checkpoint:
DIR/tokens.bin (u32 ids, 0xFFFFFFFF after each story) and DIR/features.f32 (the target's final-
RMSNorm output at every token). The target's next-token distribution at a token is
softmax(classifier(feature)), so the teacher's soft targets come from the corpus and the target's
classifier: no forward of the target in Python.

Student: a full Llama (embedding, --layers decoder layers of width --dim with --heads query and
--kv-heads key/value heads and a SwiGLU of width --hidden, final RMSNorm, a classifier of its own
or, --classifier shared, the embedding) that reads only tokens. Loss: cross-entropy of the student's next-token distribution
against the teacher's (= KL + the teacher's entropy), mixed with --w-hard times the cross-entropy of
the corpus's next token. Initialisation (--init): "pca", the student's embedding is the teacher's
projected on its --dim principal directions, or "random"; the layers are random.

At the end: on the first --holdout stories (kept out of training), how often the student's top-1
token is the teacher's, and the mean KL(teacher || student) per token.

Reproducible: the same arguments (seed, threads included) give the same file. CPU only
(scripts/install-train-deps.sh installs Debian's python3-torch). See tools/draft_model/README.md.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import llama_train as lt  # noqa: E402  (tools/common/llama_train.py: what the trainers share)


def projection(c, dim):
    """[teacher dim][dim]: the teacher embedding's top `dim` right singular vectors (orthonormal)."""
    e = torch.tensor(c["embedding"], dtype=torch.float64)
    _, _, v = torch.linalg.svd(e, full_matrices=False)
    return v[:dim].T


def pruned_teacher(c, args):
    """The teacher cut down to the student's shape, as a starting point: the residual stream
    projected on P (projection()), the layers --teacher-layers, in each the key/value heads (with
    their query heads) and the SwiGLU units of largest output weight, each RMSNorm weight folded into
    the matrix after it (the student's norms are then uniform, times sqrt(teacher dim / dim): the
    RMS of a projected stream is over fewer dimensions). Returns the embedding, layer weight dicts
    and final norm (torch float32)."""
    P = projection(c, args.dim)
    hs, group = c["dim"] // c["n_heads"], c["n_heads"] // c["n_kv_heads"]
    if args.dim // args.heads != hs or args.heads // args.kv_heads != group or args.hidden > c["hidden"]:
        lt.fail(f"--init teacher keeps whole heads: it needs --heads x {hs} = --dim, --heads / --kv-heads = {group} "
                f"and --hidden <= {c['hidden']} (the teacher's)")
    scale = (c["dim"] / args.dim) ** 0.5
    t = lambda a: torch.tensor(a, dtype=torch.float64)
    layers = []
    for l in args.teacher_layers:
        w = {k: t(v) for k, v in c["layers"][l].items()}
        # key/value groups by the size of their query heads' output weights
        groups = sorted(range(c["n_kv_heads"]), key=lambda g: -float(w["wo"][:, g * group * hs:(g + 1) * group * hs].norm()))
        groups = sorted(groups[:args.kv_heads])
        kv_rows = torch.cat([torch.arange(g * hs, (g + 1) * hs) for g in groups])
        q_rows = torch.cat([torch.arange(g * group * hs, (g + 1) * group * hs) for g in groups])
        units = (w["w2"].norm(dim=0) * w["w1"].norm(dim=1) * w["w3"].norm(dim=1)).argsort(descending=True)
        units = units[:args.hidden].sort().values
        att_in = torch.diag(w["rms_att"]) @ P
        ffn_in = torch.diag(w["rms_ffn"]) @ P
        layers.append(dict(wq=w["wq"][q_rows] @ att_in, wk=w["wk"][kv_rows] @ att_in, wv=w["wv"][kv_rows] @ att_in,
                           wo=P.T @ w["wo"][:, q_rows], w1=w["w1"][units] @ ffn_in, w3=w["w3"][units] @ ffn_in,
                           w2=P.T @ w["w2"][:, units], rms_att=torch.full((args.dim,), scale),
                           rms_ffn=torch.full((args.dim,), scale)))
    embedding = t(c["embedding"]) @ P
    # The final norm folds exactly into a classifier of its own; a shared one gets the nearest
    # diagonal (exact only when P commutes with the teacher's final norm).
    classifier = t(c["classifier"]) @ torch.diag(t(c["rms_final"])) @ P
    rms_final = scale * torch.diagonal(P.T @ torch.diag(t(c["rms_final"])) @ P)
    f = lambda a: a.float().contiguous()
    return f(embedding), [{k: f(v).numpy() for k, v in d.items()} for d in layers], f(rms_final), f(classifier)


class Student(torch.nn.Module):
    def __init__(self, c, args):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.heads, args.kv_heads
        if args.init == "pca":  # the teacher's embedding on its top --dim right singular vectors
            emb = (torch.tensor(c["embedding"], dtype=torch.float64) @ projection(c, args.dim)).float()
        elif args.init == "teacher":
            emb, pruned, rms_final, classifier = pruned_teacher(c, args)
        else:
            emb = torch.randn(c["vocab"], args.dim) * 0.02
        self.embedding = torch.nn.Parameter(emb)
        self.layers = torch.nn.ModuleList(lt.LlamaLayer(args.dim, args.hidden, args.heads, args.kv_heads)
                                          for _ in range(args.layers))
        self.rms_final = torch.nn.Parameter(torch.ones(args.dim))
        self.classifier = None  # shared with the embedding
        if args.classifier == "separate":
            self.classifier = torch.nn.Parameter(classifier if args.init == "teacher" else emb.clone())
        if args.init == "teacher":
            for layer, weights in zip(self.layers, pruned):
                layer.load(weights)
            if self.classifier is None:
                with torch.no_grad():
                    self.rms_final.copy_(rms_final)

    def ordered_parameters(self):
        out = [self.embedding, self.rms_final] + ([] if self.classifier is None else [self.classifier])
        for layer in self.layers:
            out += [layer.rms_att, layer.rms_ffn] + layer.matrices()
        return out

    def forward(self, tokens):
        """Next-token logits [B, T, vocab]."""
        B, T = tokens.shape
        x = self.embedding[tokens]
        positions = lt.positions_of(B, T)
        for layer in self.layers:
            x = layer(x, positions)
        return lt.rmsnorm(x, self.rms_final) @ (self.embedding if self.classifier is None else self.classifier).T

    def write(self, path, seq_len):
        lt.write_checkpoint(path, self.embedding, list(self.layers), self.rms_final, self.n_heads, self.n_kv_heads,
                            seq_len, self.classifier)


def losses(student, teacher_classifier, tokens, feats, mask, w_hard):
    """(loss, soft cross-entropy, KL, hard cross-entropy, top-1 agreement), means over the tokens
    under `mask`. Position k predicts t_{k+1}; the teacher's distribution there is
    softmax(classifier(f_k))."""
    logq = F.log_softmax(student(tokens), dim=-1)
    with torch.no_grad():
        logp = F.log_softmax(feats @ teacher_classifier.T, dim=-1)
        p = logp.exp()
        entropy = -((p * logp).sum(-1) * mask).sum() / mask.sum()
    n = mask.sum()
    soft = -((p * logq).sum(-1) * mask).sum() / n
    hard_mask = mask[:, 1:]  # the last token of a story has no next token in the corpus
    nll = -logq[:, :-1].gather(-1, tokens[:, 1:, None]).squeeze(-1)
    hard = (nll * hard_mask).sum() / hard_mask.sum()
    agree = ((logq.argmax(-1) == p.argmax(-1)).float() * mask).sum() / n
    loss = soft if w_hard == 0 else (1 - w_hard) * soft + w_hard * hard
    return loss, soft.item(), (soft - entropy).item(), hard.item(), agree.item(), n.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    lt.add_common_arguments(ap, lr=5e-3, window=512, batch=8)
    ap.add_argument("--dim", type=int, default=48)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=128, help="SwiGLU width")
    ap.add_argument("--seq-len", type=int, default=0, help="positions written in the header (0: the target's)")
    ap.add_argument("--init", choices=("teacher", "pca", "random"), default="teacher",
                    help="teacher: the teacher pruned to the student's shape (pruned_teacher()); pca: the teacher's "
                         "embedding projected, random layers; random")
    ap.add_argument("--classifier", choices=("separate", "shared"), default="separate",
                    help="the student's classifier: its own weights, or the embedding's")
    ap.add_argument("--teacher-layers", default="0,-1",
                    help="with --init teacher: the teacher's layers the student starts from, one per --layers")
    ap.add_argument("--w-hard", type=float, default=0.0, help="weight of the corpus's next token in the loss")
    ap.add_argument("--warmup", type=int, default=50, help="steps of linear learning-rate warm-up")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    lt.add_corpus_arguments(ap)
    args = ap.parse_args()
    if args.dim % args.heads or (args.dim // args.heads) % 2:
        lt.fail(f"--dim {args.dim} is not --heads {args.heads} heads of an even size (RoPE rotates pairs)")
    if args.heads % args.kv_heads:
        lt.fail(f"--kv-heads {args.kv_heads} does not divide --heads {args.heads}")
    args.teacher_layers = [int(x) for x in args.teacher_layers.split(",")]
    if args.init == "teacher" and len(args.teacher_layers) != args.layers:
        lt.fail(f"--teacher-layers names {len(args.teacher_layers)} layers, not --layers {args.layers}")

    rng = lt.seed_everything(args.seed, args.threads)
    c = lt.read_checkpoint(args.checkpoint)
    stories = lt.read_corpus(args.corpus, c["dim"], c["vocab"], args.max_tokens)
    held, train = lt.split_holdout(stories, args.holdout)
    seq_len = args.seq_len or c["seq_len"]
    teacher_classifier = torch.tensor(c["classifier"])
    student = Student(c, args)
    n_params = sum(p.numel() for p in student.parameters())
    print(f"train.py: teacher {c['dim']}-dim x {c['n_layers']} layers, vocab {c['vocab']}; student {args.dim}-dim x "
          f"{args.layers} layers, {args.heads}/{args.kv_heads} heads, hidden {args.hidden} ({n_params} weights); "
          f"{len(train)} training stories ({sum(len(t) for t, _ in train)} tokens), {len(held)} held out", flush=True)

    def step_losses(picks):
        loss, soft, kl, hard, agree, _ = losses(student, teacher_classifier, *lt.make_batch(train, picks, args.window),
                                                args.w_hard)
        return loss, f"KL {kl:.4f}  soft CE {soft:.4f}  next-token CE {hard:.4f}  top-1 agrees {agree:.3f}"

    step, seconds = lt.train(student.ordered_parameters(), train, args, rng, step_losses,
                             weight_decay=args.weight_decay, warmup=args.warmup)

    # Held out: every story whole (up to the model's positions), 16 at a time, token-weighted means.
    totals, count = np.zeros(3), 0.0
    with torch.no_grad():
        for b in range(0, len(held), 16):
            picks = np.arange(b, min(b + 16, len(held)))
            _, _, kl, hard, agree, n = losses(student, teacher_classifier, *lt.make_batch(held, picks, seq_len), 0.0)
            totals += n * np.array([kl, hard, agree])
            count += n
    kl, hard, agree = totals / count
    print(f"done: {step} steps in {seconds:.0f} s; held out ({int(count)} tokens): student's top-1 = teacher's top-1 "
          f"for {100 * agree:.1f}% of tokens, KL(teacher || student) {kl:.4f} nats/token, next-token CE {hard:.4f}",
          flush=True)
    student.write(args.out, seq_len)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
