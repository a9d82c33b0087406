"""The module drafts, merges and commits what SpeculativeDecoder<HashTarget, Drafters...,
ExactVerifier> does from the same context (tests/python/reference.cpp): the same tree (parents,
tokens, which drafters proposed each node) at every step."""
from pathlib import Path

import numpy as np

import specdec
from conftest import data_file


def parse(lines):
    """The reference's decode: vocabulary, prompt, steps, and the features its drafter was told
    (begin's, then one per step)."""
    vocab = int(lines[0].split()[1])
    prompt = [int(t) for t in lines[1].split()[1:]]
    steps, features = [], []
    for line in lines[2:]:
        if line.startswith("features "):
            first, rows, dim, *values = line.split()[1:]
            features.append(np.array(values, np.float32).reshape(int(rows), int(dim)))
            continue
        fields = [[int(x) for x in f.split()] for f in line[len("step "):].split("|")]
        steps.append(dict(parents=fields[0], tokens=fields[1], sources=fields[2], path=fields[3], next=fields[4][0]))
    return vocab, prompt, steps, features


def replay(decoder, vocab, prompt, steps, features=None):
    """Steps the module with logits whose argmax is the C++ verdict (and the features the C++
    drafter was told at the path's nodes), checking each tree."""
    decoder.begin(prompt, features=features[0] if features else None)
    drafted = 0
    for k, want in enumerate(steps):
        tree = decoder.draft()
        assert tree.parents.tolist() == want["parents"], f"step {k}"
        assert tree.tokens.tolist() == want["tokens"], f"step {k}"
        assert tree.sources.tolist() == want["sources"], f"step {k}"
        drafted += len(tree) - 1
        # The target's argmax after each path node is the next path token, then the next token.
        logits = np.zeros((len(tree), vocab), np.float32)
        chosen = [tree.tokens[n] for n in want["path"][1:]] + [want["next"]]
        for node, token in zip(want["path"], chosen):
            logits[node, token] = 1.0
        node_features = None
        if features:
            node_features = np.zeros((len(tree), features[0].shape[1]), np.float32)
            node_features[want["path"]] = features[k + 1]
        verdict = decoder.verify(logits, features=node_features)
        assert verdict.path.tolist() == want["path"], f"step {k}"
        assert decoder.commit().tolist() == chosen
    assert drafted > 0, "the reference drafted nothing: the comparison would be empty"
    return decoder


def test_copy_drafters_draft_as_the_cpp_decoder(reference):
    vocab, prompt, steps, _ = parse(reference("decode", "copy", 40))
    d = specdec.drafters
    decoder = specdec.Decoder(vocab, [d.Pld(), d.Casd(), d.ContextTree(), d.CasdPrompt()], budget=24)
    replay(decoder, vocab, prompt, steps)
    stats = decoder.stats
    assert stats.steps == 40
    assert stats.tokens == len(decoder.context) - len(prompt)
    assert stats.drafter_names == ["pld", "casd", "tree", "casd_prompt"]


def test_history_tree_and_draft_model_draft_as_the_cpp_decoder(reference):
    checkpoint = data_file("models/stories260K.bin")
    vocab, prompt, steps, _ = parse(reference("decode", "model", 12, checkpoint))
    d = specdec.drafters
    replay(specdec.Decoder(vocab, [d.HistoryTree(), d.DraftModel(checkpoint)], budget=16), vocab, prompt, steps)


def test_eagle_drafts_as_the_cpp_decoder_from_the_same_features(reference):
    checkpoint = data_file("models/stories260K.bin")
    head = Path(__file__).resolve().parents[2] / "tools" / "eagle" / "heads" / "stories260K.eagle"
    vocab, prompt, steps, features = parse(reference("decode", "eagle", 12, checkpoint, head))
    assert len(features) == len(steps) + 1
    replay(specdec.Decoder(vocab, [specdec.drafters.Eagle(head, checkpoint)], budget=16), vocab, prompt, steps,
           features)



def test_dresd_drafts_as_the_cpp_decoder_from_the_same_datastore_and_features(reference, tmp_path):
    """A tiny dense datastore built here (stories260K's own continuations of the prompt), searched
    by the module's Dresd and by the C++ DresdDrafter with the same features: the same trees."""
    checkpoint = data_file("models/stories260K.bin")
    datastore = tmp_path / "tiny.dense"
    reference("dense_datastore", checkpoint, datastore)
    vocab, prompt, steps, features = parse(reference("decode", "dresd", 12, checkpoint, datastore))
    assert len(features) == len(steps) + 1
    decoder = replay(specdec.Decoder(vocab, [specdec.drafters.Dresd(datastore)], budget=16), vocab, prompt, steps,
                     features)
    assert decoder.stats.drafter_names == ["dresd"]

def test_history_tree_remembers_an_ended_sequence():
    """end() hands a sequence's output to HistoryTree: the next sequence drafts it."""
    vocab, continuation = 64, list(range(10, 40))

    def decode(decoder, prompt):
        decoder.begin(prompt)
        while decoder.stats.tokens < 20:
            tree = decoder.draft()
            logits = np.zeros((len(tree), vocab), np.float32)
            for i, position in enumerate(tree.positions):  # the target continues the prompt with `continuation`
                logits[i, continuation[position - len(prompt) + 1]] = 1.0
            decoder.verify(logits)
            decoder.commit()
        tau = decoder.stats.tau
        decoder.end()
        return tau

    history = specdec.Decoder(vocab, [specdec.drafters.HistoryTree()], budget=8)
    assert decode(history, [1, 2, 3]) == 1.0
    assert decode(history, [5, 6, 1, 2, 3]) > 2.0
    assert decode(specdec.Decoder(vocab, [specdec.drafters.ContextTree()], budget=8), [5, 6, 1, 2, 3]) == 1.0
