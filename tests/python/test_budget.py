"""The automatic budget: a cost table decides how many ranked nodes a step sends."""
import numpy as np
import pytest

import specdec
from test_drafting import parse, replay

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


# ---- the pause (DraftingPause): drafting stops while it does not pay ------------------------------

BUDGET = 16
FORWARD = [1.0 + 0.01 * n for n in range(BUDGET + 1)]  # seconds of a forward of n + 1 nodes


class TickClock:
    """A clock that advances `tick` seconds at each reading: draft() reads it when it starts and
    when it is done, so a step's drafting takes exactly one tick."""

    def __init__(self, tick):
        self.now, self.tick = 0.0, tick

    def __call__(self):
        self.now += self.tick
        return self.now


def period_step(decoder, vocab, step_seconds=None):
    """A target that continues the prompt's period (1 ... 6): the copy drafter's chain is accepted."""
    tree = decoder.draft()
    logits = np.zeros((len(tree), vocab), np.float32)
    logits[np.arange(len(tree)), tree.tokens % 6 + 1] = 1.0
    decoder.verify(logits)
    decoder.commit(None if step_seconds is None else step_seconds(len(tree)))
    return len(tree) - 1


def decode_with_pause(steps, step_seconds=None, **options):
    vocab = 8
    decoder = specdec.Decoder(vocab, [d.Pld()], budget=BUDGET, cost=FORWARD, **options)
    decoder.begin(PROMPT)
    nodes = [period_step(decoder, vocab, step_seconds) for _ in range(steps)]
    return decoder, nodes



@pytest.mark.parametrize("tick", [0.5, 1.0, 4.0])
def test_the_pause_decides_as_the_cpp_decoders(reference, tick):
    """SpeculativeDecoder<HashTarget, PldDrafter, ExactVerifier> with the same cost model, the
    modelled pause and a clock that ticks alike (tests/python/reference.cpp): the same tree, or the
    root alone, at every step."""
    vocab, prompt, steps, _ = parse(reference("decode", "pause", 40, tick))
    decoder = specdec.Decoder(vocab, [d.Pld()], budget=BUDGET, cost=FORWARD, measured_pause=False,
                              clock=TickClock(tick))
    replay(decoder, vocab, prompt, steps)
    root_only = sum(len(step["tokens"]) == 1 for step in steps)
    assert 0 < decoder.stats.paused_steps <= root_only

def test_a_drafter_that_pays_is_never_paused():
    decoder, nodes = decode_with_pause(40, measured_pause=False, clock=TickClock(0.01))
    assert decoder.stats.paused_steps == 0
    assert min(nodes) > 0 and decoder.stats.tau > 5


def test_a_drafter_that_costs_more_than_a_step_can_save_is_paused():
    # 50 s of drafting against 1 s forwards: even a budget's 17 tokens cannot make it up.
    decoder, nodes = decode_with_pause(40, measured_pause=False, clock=TickClock(50.0))
    assert nodes[0] > 0  # the first step drafts (a probe) ...
    assert nodes[1:] == [0] * 39 and decoder.stats.paused_steps == 39  # ... and the drafter pauses


def test_a_measured_step_that_loses_to_plain_steps_pauses_the_drafter():
    """The caller reports each step's measured seconds (e.g. its forward timed with CUDA events):
    a drafting step that takes 40 plain steps' time pauses the drafter, one that takes a forward's
    does not. The decoder's own clock stands still."""
    still = dict(clock=lambda: 0.0)
    costly, _ = decode_with_pause(40, step_seconds=lambda n: FORWARD[n - 1] + (40.0 if n > 1 else 0.0), **still)
    cheap, cheap_nodes = decode_with_pause(40, step_seconds=lambda n: FORWARD[n - 1], **still)
    assert cheap.stats.paused_steps == 0 and min(cheap_nodes) > 0
    assert costly.stats.paused_steps >= 20
    assert costly.stats.tokens < cheap.stats.tokens


def test_step_seconds_and_the_clock_are_checked():
    decoder = specdec.Decoder(8, [d.Pld()], budget=BUDGET, cost=FORWARD)
    decoder.begin(PROMPT)
    tree = decoder.draft()
    decoder.verify(np.ones((len(tree), 8), np.float32))
    with pytest.raises(specdec.Error, match=r"step_seconds must be finite and >= 0, got -1"):
        decoder.commit(-1.0)
    with pytest.raises(specdec.Error, match=r"clock must be a callable that returns seconds, got float"):
        specdec.Decoder(8, [d.Pld()], cost=FORWARD * 5, clock=1.5)
