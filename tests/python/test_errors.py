"""Bad input raises specdec.Error (a ValueError) with one sentence naming the bad value; nothing
crashes."""
import numpy as np
import pytest
import torch

import specdec

d = specdec.drafters


def drafted(vocab=16, budget=8):
    decoder = specdec.Decoder(vocab, [d.Pld()], budget=budget)
    decoder.begin([1, 2, 3] * 8)
    tree = decoder.draft()
    assert len(tree) > 1
    return decoder, tree


def test_logits_of_a_wrong_dtype_shape_or_device_are_refused():
    decoder, tree = drafted()
    n = len(tree)
    cases = [
        (np.zeros((n, 16), np.float64), r"dtype float64, need float32"),
        (torch.zeros(n, 16, dtype=torch.bfloat16), r"dtype torch.bfloat16, need torch.float32"),
        (np.zeros((n + 1, 16), np.float32), rf"shape \({n + 1}, 16\), need \({n}, 16\)"),
        (np.zeros((n, 17), np.float32), rf"shape \({n}, 17\), need \({n}, 16\)"),
        (np.zeros((n * 16,), np.float32), r"1 dimensions, need 2"),
        (np.zeros((16, n), np.float32).T, r"each row must be contiguous"),
        (torch.zeros(n, 16, device="meta"), r"tensor on meta"),
        ([[0.0] * 16] * n, r"NumPy array or a torch.Tensor, got list"),
    ]
    for logits, message in cases:
        with pytest.raises(specdec.Error, match=message):
            decoder.verify(logits)
    assert issubclass(specdec.Error, ValueError)


def test_tokens_outside_the_vocabulary_or_of_a_wrong_type_are_refused():
    decoder = specdec.Decoder(16, [d.Pld()])
    with pytest.raises(specdec.Error, match=r"prompt token 2 is 16, outside the vocabulary \[0, 16\)"):
        decoder.begin([1, 2, 16])
    with pytest.raises(specdec.Error, match=r"prompt\[0\] is -1"):
        decoder.begin(np.array([-1, 2]))
    with pytest.raises(specdec.Error, match=r"dtype float32, need integers"):
        decoder.begin(np.array([1.0, 2.0], np.float32))
    with pytest.raises(specdec.Error, match=r"the prompt is empty"):
        decoder.begin([])
    with pytest.raises(specdec.Error, match=r"holds a str"):
        decoder.begin([1, "2"])


def test_calls_out_of_order_are_refused():
    decoder = specdec.Decoder(16, [d.Pld()])
    with pytest.raises(specdec.Error, match=r"call begin\(prompt\) first"):
        decoder.draft()
    decoder.begin([1, 2, 3])
    with pytest.raises(specdec.Error, match=r"call draft\(\) first"):
        decoder.verify(np.zeros((1, 16), np.float32))
    with pytest.raises(specdec.Error, match=r"call verify\(\) or accept\(\) after draft\(\)"):
        decoder.commit()
    tree = decoder.draft()
    decoder.verify(np.zeros((len(tree), 16), np.float32))
    with pytest.raises(specdec.Error, match=r"not committed yet"):
        decoder.draft()


def test_bad_options_and_files_are_refused_with_the_library_sentence(tmp_path):
    with pytest.raises(specdec.Error, match=r"depth must be >= 1, got 0"):
        d.Pld(depth=0)
    with pytest.raises(specdec.Error, match=r"budget must be >= 0, got -1"):
        specdec.Decoder(16, budget=-1)
    with pytest.raises(specdec.Error, match=r"cost table has 3 entries, the budget needs budget \+ 1 = 9"):
        specdec.Decoder(16, [d.Pld()], budget=8, cost=[1.0, 1.0, 1.0])
    with pytest.raises(specdec.Error, match=r"cost\[1\] is -1"):
        specdec.Decoder(16, [d.Pld()], budget=2, cost=[1.0, -1.0, 1.0])
    with pytest.raises(specdec.Error, match=r"top_p 1.5"):
        specdec.RejectionSampling(top_p=1.5)
    missing = tmp_path / "missing.bin"
    for make in (lambda: d.Rest(missing), lambda: d.Ngram(missing), lambda: d.DraftModel(missing),
                 lambda: d.Dresd(missing), lambda: d.Eagle(missing, missing)):
        with pytest.raises(specdec.Error, match="missing.bin"):
            make()


def test_a_drafter_serves_one_decoder():
    pld = d.Pld()
    first = specdec.Decoder(16, [pld])
    with pytest.raises(specdec.Error, match=r"drafter 0 \(pld\) already serves another decoder"):
        specdec.Decoder(16, [pld])
    del first


def test_bad_standalone_trees_are_refused():
    logits = np.zeros((3, 8), np.float32)
    with pytest.raises(specdec.Error, match=r"parents\[0\] is 0, the root's must be -1"):
        specdec.verify([0, 0, 1], [1, 2, 3], logits, specdec.Greedy())
    with pytest.raises(specdec.Error, match=r"parents\[2\] is 2: a parent must come before its child"):
        specdec.verify([-1, 0, 2], [1, 2, 3], logits, specdec.Greedy())
    with pytest.raises(specdec.Error, match=r"token 9, vocabulary size 8"):
        specdec.verify([-1, 0, 1], [1, 2, 9], logits, specdec.Greedy())
    with pytest.raises(specdec.Error, match=r"need one per tree node"):
        specdec.verify([-1, 0], [1, 2, 3], logits, specdec.Greedy())
    with pytest.raises(specdec.Error, match=r"contains NaN"):
        specdec.verify([-1, 0, 1], [1, 2, 3], np.full((3, 8), np.nan, np.float32), specdec.Greedy())


def test_a_verdict_from_elsewhere_is_checked():
    decoder, tree = drafted()
    with pytest.raises(specdec.Error, match=r"accepted path entry 1 \(node 2\) is not a child of the previous node"):
        decoder.accept([0, 2], 5)
    with pytest.raises(specdec.Error, match=r"the next token is 16, outside the vocabulary"):
        decoder.accept([0, 1], 16)
    verdict = decoder.accept([0, 1], 5)
    assert verdict.tokens.tolist() == [tree.tokens[1], 5]
    assert decoder.commit().tolist() == [tree.tokens[1], 5]


def test_a_feature_drafter_without_features_is_refused():
    from conftest import data_file
    from pathlib import Path
    checkpoint = data_file("models/stories260K.bin")
    head = Path(__file__).resolve().parents[2] / "tools" / "eagle" / "heads" / "stories260K.eagle"
    decoder = specdec.Decoder(512, [d.Eagle(head, checkpoint)])
    with pytest.raises(specdec.Error, match=r"drafter eagle reads the target's features: pass features"):
        decoder.begin([1, 2, 3])
    with pytest.raises(specdec.Error, match=r"features have shape \(3, 64\), need \(2, 64\)"):
        decoder.begin([1, 2, 3], features=np.zeros((3, 64), np.float32))
    with pytest.raises(specdec.Error, match=r"features have dtype float64"):
        decoder.begin([1, 2, 3], features=np.zeros((2, 64)))
    with pytest.raises(specdec.Error, match=r"eagle: told feature rows \[0, \+2\) of dim 65, expected \[0, \+2\) of dim 64"):
        decoder.begin([1, 2, 3], features=np.zeros((2, 65), np.float32))
    decoder.begin([1, 2, 3], features=np.zeros((2, 64), np.float32))
    tree = decoder.draft()
    logits = np.zeros((len(tree), 512), np.float32)
    with pytest.raises(specdec.Error, match=r"Decoder.verify: drafter eagle reads the target's features"):
        decoder.verify(logits)
    with pytest.raises(specdec.Error, match=r"features have 32 columns, begin\(\) had 64"):
        decoder.verify(logits, features=np.zeros((len(tree), 32), np.float32))
