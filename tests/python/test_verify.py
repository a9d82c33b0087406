"""Verification through the module agrees with the C++ verifiers on the same tree and logits
(tests/python/reference.cpp), from NumPy arrays and from PyTorch tensors, in the Decoder and in
specdec.verify."""
import numpy as np
import pytest
import torch

import specdec


def random_tree(rng, n, vocab):
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    tokens = rng.integers(0, vocab, n).astype(np.int32)
    return np.array(parents, np.int32), tokens


def peaked_logits(rng, parents, tokens, vocab):
    """Logits that favour each node's first child, so that paths get accepted."""
    logits = rng.normal(0, 1, (len(parents), vocab)).astype(np.float32)
    for i in range(len(parents) - 1, 0, -1):
        logits[parents[i], tokens[i]] += 3.0
    return logits


def run_reference(reference, tmp_path, parents, tokens, logits, base, *verifier):
    file = tmp_path / "tree.bin"
    header = np.array([len(parents), logits.shape[1], base], np.int32)
    file.write_bytes(header.tobytes() + parents.astype(np.int32).tobytes() + tokens.astype(np.int32).tobytes()
                     + np.ascontiguousarray(logits, np.float32).tobytes())
    (line,) = reference("verify", file, *verifier)
    path, next_token = line[len("path "):].split("|")
    return [int(x) for x in path.split()], int(next_token)


VERIFIERS = [
    (lambda: specdec.Greedy(), ["greedy"]),
    (lambda: specdec.RejectionSampling(temperature=1.0, seed=7), ["rejection", 1.0, 0, 1.0, 0.0, 7, 0]),
    (lambda: specdec.RejectionSampling(temperature=0.7, top_k=20, top_p=0.9, min_p=0.01, seed=3, sequence=2),
     ["rejection", 0.7, 20, 0.9, 0.01, 3, 2]),
    (lambda: specdec.Conditional(eos=2, delta=0.05, top_k=0), ["conditional", 2, 0.05, 0, 0.0, 0, 0]),
    (lambda: specdec.Conditional(eos=2, delta=0.1, top_k=5, temperature=1.0, seed=11),
     ["conditional", 2, 0.1, 5, 1.0, 11, 0]),
]


@pytest.mark.parametrize("make, args", VERIFIERS)
def test_verify_agrees_with_the_cpp_verifier(reference, tmp_path, make, args):
    rng = np.random.default_rng(1)
    accepted = 0
    for trial in range(12):
        vocab, n, base = 50, int(rng.integers(1, 40)), int(rng.integers(0, 100))
        parents, tokens = random_tree(rng, n, vocab)
        logits = peaked_logits(rng, parents, tokens, vocab)
        want_path, want_next = run_reference(reference, tmp_path, parents, tokens, logits, base, *args)
        for given in (logits, torch.from_numpy(logits)):
            v = specdec.verify(parents, tokens, given, make(), base_position=base)
            assert v.path.tolist() == want_path, f"trial {trial}"
            assert v.next_token == want_next, f"trial {trial}"
            assert v.tokens.tolist() == [int(tokens[i]) for i in want_path[1:]] + [want_next]
        accepted += len(want_path) - 1
    assert accepted > 0, "no trial accepted a draft token: the comparison would be weak"


def test_decoder_verify_matches_standalone_verify():
    """The Decoder's verify of its own tree is specdec.verify of the same arrays."""
    rng = np.random.default_rng(2)
    vocab = 30
    prompt = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3]
    for seed in range(5):
        decoder = specdec.Decoder(vocab, [specdec.drafters.Pld(), specdec.drafters.Casd()],
                                  verifier=specdec.RejectionSampling(seed=seed), budget=12)
        decoder.begin(prompt)
        tree = decoder.draft()
        assert len(tree) > 1
        logits = peaked_logits(rng, tree.parents, tree.tokens, vocab)
        alone = specdec.verify(tree.parents, tree.tokens, logits, specdec.RejectionSampling(seed=seed),
                               base_position=tree.base_position)
        v = decoder.verify(logits)
        assert v.path.tolist() == alone.path.tolist() and v.next_token == alone.next_token


def test_logits_with_a_row_stride_are_read_in_place():
    """A view whose rows are further apart than the vocabulary (e.g. a slice of a wider buffer)."""
    rng = np.random.default_rng(3)
    parents, tokens = random_tree(rng, 9, 40)
    wide = rng.normal(0, 1, (9, 64)).astype(np.float32)
    want = specdec.verify(parents, tokens, np.ascontiguousarray(wide[:, :40]), specdec.Greedy())
    for view in (wide[:, :40], torch.from_numpy(wide)[:, :40]):
        got = specdec.verify(parents, tokens, view, specdec.Greedy())
        assert got.path.tolist() == want.path.tolist() and got.next_token == want.next_token

