"""The PyTorch example (examples/python/llama2c.py) is lossless, and docs/python.md's first
example runs as written. The full stories task is a documented command (docs/python.md); CI
decodes its first prompts."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import specdec
from conftest import data_file

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "python"))
import llama2c  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    return specdec.Tokenizer(data_file("models/tok512.bin"))


@pytest.mark.parametrize("row_by_row, onednn, prompts", [(False, False, 6), (True, False, 2), (False, True, 1)])
def test_speculative_output_equals_plain_greedy_decoding(tokenizer, row_by_row, onednn, prompts):
    model = llama2c.Llama2c(data_file("models/stories260K.bin"), onednn=onednn)
    model.row_by_row = row_by_row or not llama2c.batch_invariant(model)
    d = specdec.drafters
    decoder = specdec.Decoder(model.vocab, [d.Pld(), d.Casd(), d.ContextTree()], budget=16,
                              max_positions=model.seq_len)
    prompts = specdec.tasks()["stories"][:prompts]
    steps = tokens = 0
    for text in prompts:
        prompt = tokenizer.encode(text).tolist()
        want = llama2c.plain(model, prompt, 64)
        assert llama2c.speculative(model, decoder, prompt, 64) == want
        steps, tokens = steps + decoder.stats.steps, tokens + decoder.stats.tokens
    assert tokens > steps, "no draft token was accepted: the check would not exercise the tree forward"


def test_the_first_example_of_the_docs_runs_as_written():
    data_file("models/stories260K.bin")
    text = (ROOT / "docs" / "python.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) < 30
    env = dict(os.environ, SPECDEC_DATA=str(data_file("models").parent))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "tau" in done.stdout


def test_eagle_from_pytorch_features_is_lossless_and_accepted(tokenizer):
    """EAGLE's head reads the PyTorch model's features (the classifier's input)."""
    model = llama2c.Llama2c(data_file("models/stories260K.bin"))
    model.row_by_row = not llama2c.batch_invariant(model)
    decoder = specdec.Decoder(model.vocab, [llama2c.drafter("eagle", data_file("models/stories260K.bin"))],
                              budget=16, max_positions=model.seq_len)
    steps = tokens = 0
    for text in specdec.tasks()["stories"][:2]:
        prompt = tokenizer.encode(text).tolist()
        assert llama2c.speculative(model, decoder, prompt, 64) == llama2c.plain(model, prompt, 64)
        steps, tokens = steps + decoder.stats.steps, tokens + decoder.stats.tokens
    assert tokens > 2 * steps, f"EAGLE's tau is {tokens / steps:.2f}: its drafts from these features are rarely accepted"
