"""Logits in CUDA memory (a CUDA tensor, or any object with __cuda_array_interface__): checked on
the host like any logits, then verified by the library's CUDA kernels on that memory. The refusals
run everywhere; the tests marked gpu (ctest's python_gpu, label gpu) compare the CUDA verdicts
with the host's on the same logits and skip without a device."""
import numpy as np
import pytest

import specdec
from device_memory import on_device, source

d = specdec.drafters


class FakeDeviceRows:
    """__cuda_array_interface__ over an address that is no device memory."""

    def __init__(self, **changes):
        face = {"shape": (2, 8), "typestr": "<f4", "data": (0x1000, False), "strides": None, "version": 3}
        face.update(changes)
        self.__cuda_array_interface__ = face


PARENTS, TOKENS = np.array([-1, 0], np.int32), np.array([1, 2], np.int32)


@pytest.mark.parametrize("changes, message", [
    ({"typestr": "<f2"}, r"typestr <f2, need <f4 \(float32\)"),
    ({"typestr": "<f8"}, r"typestr <f8, need <f4"),
    ({"shape": (3, 8)}, r"shape \(3, 8\), need \(2, 8\)"),
    ({"shape": (2, 8, 1)}, r"3 dimensions, need 2"),
    ({"strides": (32, 8)}, r"each row must be contiguous"),
    ({"strides": (4, 32)}, r"each row must be contiguous"),
    ({"data": (0, False)}, r"null data pointer"),
    ({"mask": object()}, r"masked logits are not supported"),
])
def test_device_logits_of_a_wrong_dtype_shape_or_layout_are_refused(changes, message):
    with pytest.raises(specdec.Error, match=message):
        specdec.verify(PARENTS, TOKENS, FakeDeviceRows(**changes), specdec.Greedy())


def test_an_address_that_is_no_device_memory_is_refused():
    """Whatever the build: without CUDA it says so; with CUDA the address is looked up and refused
    (no driver, no device, or host memory), never read."""
    with pytest.raises(specdec.Error, match=r"no CUDA backend|cannot tell which CUDA device|not CUDA device memory"):
        specdec.verify(PARENTS, TOKENS, FakeDeviceRows(), specdec.Greedy())


def test_a_decoder_refuses_device_logits_of_the_wrong_shape():
    decoder = specdec.Decoder(16, [d.Pld()], budget=8)
    decoder.begin([1, 2, 3] * 8)
    n = len(decoder.draft())
    with pytest.raises(specdec.Error, match=rf"shape \({n}, 15\), need \({n}, 16\)"):
        decoder.verify(FakeDeviceRows(shape=(n, 15)))


# ---- on a GPU ------------------------------------------------------------------------------------

needs_device = pytest.mark.skipif(source() is None, reason="no CUDA device")


def random_case(rng, n, vocab):
    parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)], np.int32)
    tokens = rng.integers(0, vocab, n).astype(np.int32)
    logits = rng.normal(0, 2, (n, vocab)).astype(np.float32)
    for i in range(n - 1, 0, -1):  # favour each node's first child, so that paths get accepted
        logits[parents[i], tokens[i]] += 6.0
    return parents, tokens, logits


VERIFIERS = [
    lambda: specdec.Greedy(),
    lambda: specdec.RejectionSampling(temperature=1.0, seed=7),
    lambda: specdec.RejectionSampling(temperature=0.7, top_k=20, top_p=0.9, seed=3, sequence=2),
    lambda: specdec.Conditional(eos=2, delta=0.1, top_k=5, temperature=1.0, seed=11),
]


@pytest.mark.gpu
@needs_device
@pytest.mark.parametrize("make", VERIFIERS)
@pytest.mark.parametrize("vocab", [50, 32000])
def test_cuda_verdict_equals_the_host_verdict(make, vocab):
    rng = np.random.default_rng(vocab)
    accepted = 0
    for trial in range(8):
        n, base = int(rng.integers(1, 65)), int(rng.integers(0, 100))
        parents, tokens, logits = random_case(rng, n, vocab)
        host = specdec.verify(parents, tokens, logits, make(), base_position=base)
        for row_floats in (None, vocab + 13):  # rows packed, and rows further apart (a slice)
            gpu = specdec.verify(parents, tokens, on_device(logits, row_floats), make(), base_position=base)
            assert gpu.path.tolist() == host.path.tolist(), f"trial {trial}"
            assert gpu.next_token == host.next_token, f"trial {trial}"
        accepted += host.accepted
    assert accepted > 0, "no trial accepted a draft token: the comparison would be weak"


@pytest.mark.gpu
@needs_device
@pytest.mark.parametrize("make", VERIFIERS[:2])
def test_a_decoder_verifying_on_the_gpu_commits_what_it_commits_on_the_host(make):
    """Two decoders on the same logits, one given them in device memory: the same tokens."""
    vocab, rng = 32000, np.random.default_rng(5)
    prompt = [int(t) for t in rng.integers(0, 40, 12)] * 3
    decoders = [specdec.Decoder(vocab, [d.Pld(), d.Casd()], verifier=make(), budget=24) for _ in range(2)]
    for decoder in decoders:
        decoder.begin(prompt)
    for step in range(20):
        trees = [decoder.draft() for decoder in decoders]
        assert trees[0].tokens.tolist() == trees[1].tokens.tolist()
        _, _, logits = random_case(rng, len(trees[0]), vocab)
        logits[np.arange(len(trees[0])), np.roll(trees[0].tokens, -1)] += 4.0  # follow the tree's chain
        host = decoders[0].verify(logits)
        gpu = decoders[1].verify(on_device(logits))
        assert gpu.path.tolist() == host.path.tolist() and gpu.next_token == host.next_token, f"step {step}"
        assert decoders[0].commit().tolist() == decoders[1].commit().tolist()
    assert decoders[1].stats.tau > 1.0


@pytest.mark.gpu
@pytest.mark.skipif(source() != "torch", reason="no PyTorch with CUDA")
def test_cuda_tensors_are_checked_and_verified_on_the_current_stream():
    import torch
    rng = np.random.default_rng(9)
    parents, tokens, logits = random_case(rng, 40, 1000)
    host = specdec.verify(parents, tokens, logits, specdec.RejectionSampling(seed=1))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # written on a side stream: verify() runs after it there
        rows = torch.from_numpy(logits).cuda() * 1.0
        gpu = specdec.verify(parents, tokens, rows, specdec.RejectionSampling(seed=1))
    assert gpu.path.tolist() == host.path.tolist() and gpu.next_token == host.next_token
    for bad, message in [(rows.half(), r"dtype torch.float16, need torch.float32"),
                         (rows.t().contiguous().t(), r"each row must be contiguous"),
                         (rows[:-1], r"shape \(39, 1000\), need \(40, 1000\)")]:
        with pytest.raises(specdec.Error, match=message):
            specdec.verify(parents, tokens, bad, specdec.Greedy())
