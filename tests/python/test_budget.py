"""The automatic budget: a cost table decides how many ranked nodes a step sends."""
import numpy as np

import specdec

d = specdec.drafters
PROMPT = [1, 2, 3, 4, 5, 6] * 6


def step(decoder, vocab):
    tree = decoder.draft()
    logits = np.zeros((len(tree), vocab), np.float32)
    logits[:, 0] = 1.0  # the target always says token 0: no draft of the prompt's tokens is accepted
    decoder.verify(logits)
    decoder.commit()
    return len(tree) - 1


def test_a_forward_that_costs_per_node_sends_no_node():
    vocab, budget = 8, 16
    steep = [float(n) for n in range(1, budget + 2)]  # n nodes cost n plain steps: drafting never pays
    decoder = specdec.Decoder(vocab, [d.Pld()], budget=budget, cost=steep)
    decoder.begin(PROMPT)
    assert [step(decoder, vocab) for _ in range(3)] == [0, 0, 0]
    assert decoder.stats.sized_steps == 3


def test_a_free_forward_sends_the_draft_until_it_fails():
    vocab, budget = 8, 16
    flat = [1.0] * (budget + 1)  # a tree costs what one token does: every ranked node is worth sending
    decoder = specdec.Decoder(vocab, [d.Pld()], budget=budget, cost=flat)
    decoder.begin(PROMPT)
    first = step(decoder, vocab)
    assert first == 10  # PLD's chain (depth 10) with the prior's acceptance estimates
    assert decoder.stats.expected_tokens > 1.0
