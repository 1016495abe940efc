"""Multi-speaker piper voices (issue 33): a piper-format model with several speakers, added with
`kame-data voices add`, cast by speaker id or all at once, each speaker screened as its own voice."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest
import yaml

from kame_data.speech.voice import open_engine
from kame_data.speech.voices import resolve
from tests.conftest import CLI
from tests.speech.piper_bank import SPEAKERS, build_bank


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    """The test bank added to a fresh voice cache through the CLI; yields the environment that sees it."""
    env = os.environ | {"KAME_DATA_CACHE_DIR": str(tmp_path_factory.mktemp("bank-cache"))}
    model = build_bank(tmp_path_factory.mktemp("download") / "en_US-bank-medium.onnx")
    r = subprocess.run(CLI + ["voices", "add", str(model), "--name", "bank"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "3 speakers" in r.stdout and "ann, bob, cy" in r.stdout
    listed = subprocess.run(CLI + ["voices", "list"], capture_output=True, text=True, env=env)
    assert "bank, 3 speakers" in listed.stdout, listed.stdout
    old = os.environ["KAME_DATA_CACHE_DIR"]
    os.environ["KAME_DATA_CACHE_DIR"] = env["KAME_DATA_CACHE_DIR"]
    yield env
    os.environ["KAME_DATA_CACHE_DIR"] = old


def test_each_speaker_is_its_own_voice_and_renders_its_own_audio(bank):
    pool = resolve([{"engine": "piper", "voice": "bank", "speaker": "*"}, "joe"], "user")
    assert [v.label for v in pool] == [f"piper:bank(speaker={s})" for s in SPEAKERS] + ["joe"]
    one = resolve({"engine": "piper", "voice": "bank", "speaker": "bob", "name": "bob"}, "user")
    assert [(v.label, v.speaker) for v in one] == [("bob", "bob")]
    named = resolve({"engine": "piper", "voice": "bank", "speaker": "*", "name": "bank"}, "user")
    assert [v.label for v in named] == ["bank-ann", "bank-bob", "bank-cy"]
    text = "Which gas do plants take in for photosynthesis?"
    seconds = {}
    for v in pool[:3]:
        syn = open_engine(v, 1).synthesize(text)
        assert all(s is not None and e is not None for s, e in syn.spans)  # piper still times every word
        seconds[v.speaker] = len(syn.audio) / syn.sample_rate
    # the model's speakers differ (here in tempo): bob speaks slower than ann, cy faster
    assert seconds["cy"] < seconds["ann"] < seconds["bob"], seconds
    again = open_engine(pool[1], 1).synthesize(text)
    assert np.array_equal(again.audio, open_engine(pool[1], 1).synthesize(text).audio)


@pytest.mark.parametrize("voice, message", [
    ({"engine": "piper", "voice": "bank", "speaker": "zed"}, "has no speaker 'zed' (3 speakers: ann, bob, cy)"),
    ({"engine": "piper", "voice": "joe", "speaker": 2}, "has one speaker; drop `speaker: 2`"),
    ({"engine": "piper", "voice": "joe", "speaker": "*"}, "has one speaker"),
])
def test_a_wrong_speaker_is_a_recipe_error(bank, voice, message):
    with pytest.raises(ValueError, match="speak.user: piper:") as e:
        resolve([voice], "user")
    assert message in str(e.value)


@pytest.mark.slow
def test_voices_check_screens_every_speaker_once(bank, tmp_path):
    recipe = tmp_path / "bank.yaml"
    recipe.write_text(yaml.safe_dump({"name": "bank", "sources": [{"kind": "gsm8k", "path": "x.jsonl"}],
                                      "speak": {"assistant": "joe",
                                                "user": [{"engine": "piper", "voice": "bank", "speaker": "*"}]}}))
    figures = tmp_path / "figures.json"
    cmd = CLI + ["voices", "check", str(recipe), "--sentences", "4", "--json", str(figures)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=bank)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "4 voices: 4 measured now, 0 from the cache" in r.stdout, r.stdout
    got = json.loads(figures.read_text())
    assert got["users"] == [f"piper:bank(speaker={s})" for s in SPEAKERS]
    for label in got["users"]:
        assert got["voices"][label]["median_wer"] <= 0.25 and "to_assistant" in got["voices"][label]
    r = subprocess.run(cmd, capture_output=True, text=True, env=bank)
    assert r.returncode == 0 and "4 voices: 0 measured now, 4 from the cache" in r.stdout, r.stdout
