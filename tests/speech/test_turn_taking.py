"""Live turn-taking: where backchannels and barge-ins go, gap histograms, the reply-timing gate, and
the oracle ladder of a dialogue with a backchannel against docs/design.md ("Floor words": the ladder
reads the floor words, backchannels excluded, with the reference rules unchanged)."""

import random

import numpy as np
import pytest

from kame_data.oracle.ladder import floor_words, ladder
from kame_data.oracle.metrics import true_replies
from kame_data.oracle.config import OracleConfig
from kame_data.oracle.stage import OracleStage
from kame_data.llm.config import BackendConfig
from kame_data.records import Dialogue, RenderedDialogue, Sample, Turn, TurnTiming, Word
from kame_data.speech.config import GapConfig, ReplyConfig, SpeakConfig
from kame_data.speech.live import answer_words, cut_turn, reply_gaps
from kame_data.speech.mix import SpokenTurn
from kame_data.speech.turntaking import TurnTakingConfig, backchannel_slots, barge_in
from tests.loopback_server import LoopbackServer
from tests.oracle.test_ladder import EXAMPLE, reference_ladder
from tests.steps import run_flat


def _floor(n: int = 40, speaker: str = "B", step: float = 0.35, pause_every: int = 8):
    """n words of one turn, a longer pause every `pause_every` words."""
    out, t = [], 0.5
    for i in range(n):
        out.append((speaker, f"w{i}", round(t, 3), round(t + 0.25, 3)))
        t += step + (0.4 if i % pause_every == pause_every - 1 else 0.0)
    return out


def test_backchannels_fall_on_word_boundaries_of_the_other_speaker_with_spacing():
    floor = _floor()
    cfg = TurnTakingConfig(backchannels_per_minute=30, min_spacing=2.0)
    boundaries = {w[3] for w in floor[:-1]}
    counts = []
    for seed in range(50):
        slots = backchannel_slots(floor, [("B", 0, len(floor))], cfg, random.Random(seed))
        counts.append(len(slots))
        for s in slots:
            assert s.speaker == "A" and s.text in cfg.backchannel_words
            assert any(0.05 <= s.start - b <= 0.25 for b in boundaries)  # just after a word ends
            assert floor[0][2] + cfg.edge <= s.start and s.start <= floor[-1][3] - cfg.edge + 0.25
        starts = [s.start for s in slots]
        assert all(b - a >= cfg.min_spacing - 0.2 for a, b in zip(starts, starts[1:]))
    assert 2 <= np.mean(counts) <= 8  # about 30 per minute of a ~17 s turn, thinned by the spacing


def test_pauses_attract_backchannels_and_listeners_are_respected():
    floor = _floor(pause_every=8)
    pauses = {floor[i][3] for i in range(7, len(floor) - 1, 8)}
    picked = [s.start for seed in range(200) for s in backchannel_slots(
        floor, [("B", 0, len(floor))], TurnTakingConfig(backchannels_per_minute=10), random.Random(seed))]
    at_pause = sum(any(0 <= p - b <= 0.3 for b in pauses) for p in picked) / len(picked)
    assert at_pause > 3 * (len(pauses) / (len(floor) - 1))  # far above the share of boundaries that are pauses
    only_user = TurnTakingConfig(backchannels_per_minute=30, listeners=("user",))
    assert backchannel_slots(floor, [("B", 0, len(floor))], only_user, random.Random(0)) == []
    with pytest.raises(ValueError):
        TurnTakingConfig(listeners=("narrator",))


def test_barge_in_cuts_after_the_answer_and_overlaps():
    spans = [(0.3 * i, 0.3 * i + 0.25) for i in range(20)]
    cfg = TurnTakingConfig(barge_in_rate=1.0, reaction=(0.3, 0.3))
    for seed in range(30):
        keep, gap = barge_in(spans, protect=15, cfg=cfg, rng=random.Random(seed))
        assert 15 <= keep < 20 and gap == pytest.approx(-0.3)
    assert barge_in(spans, protect=20, cfg=cfg, rng=random.Random(0)) is None  # the answer is the last word
    assert barge_in(spans, 0, TurnTakingConfig(), random.Random(0)) is None  # off by default
    turn = SpokenTurn("A", np.ones(24000, np.float32), [f"w{i}" for i in range(4)],
                      [(0.1, 0.3), (0.35, 0.5), (0.55, 0.7), (0.75, 0.9)], "v")
    cut = cut_turn(turn, 2, 24000)
    assert cut.words == ["w0", "w1"] and len(cut.audio) == round(0.53 * 24000) and cut.audio[-1] == 0.0
    assert answer_words(["B", "Mars"], "It's B Mars because of iron".split()) == 2
    assert answer_words(["eighteen dollars"], "so it comes to eighteen dollars".split()) == 6
    assert answer_words([], ["x"]) == 0


def test_histogram_gaps_and_the_reply_gate():
    g = GapConfig(distribution="histogram", edges=[-0.4, -0.1, 0.2, 0.6, 1.2], weights=[1, 2, 5, 2])
    rng = random.Random(0)
    xs = [g.draw(rng) for _ in range(20000)]
    assert min(xs) >= -0.4 and max(xs) <= 1.2
    shares = np.histogram(xs, bins=g.edges)[0] / len(xs)
    assert np.allclose(shares, [0.1, 0.2, 0.5, 0.2], atol=0.015)
    assert 0.6 < g.quantile(0.95) < 1.2
    with pytest.raises(ValueError, match="edges"):
        GapConfig(distribution="histogram", edges=[0, 1], weights=[1, 2])
    with pytest.raises(ValueError, match="95th percentile"):
        ReplyConfig(gap={"distribution": "uniform", "low": 0.5, "high": 2.0}, max_p95=1.0)
    with pytest.raises(ValueError, match="95th percentile"):  # replies inherit speak.gap
        SpeakConfig(gap=(0.5, 2.0), reply=ReplyConfig(max_p95=1.0))
    cfg = SpeakConfig(reply=ReplyConfig(gap={"distribution": "uniform", "low": -0.2, "high": 0.1}))
    assert cfg.gap_for("A", "B").high == 0.1 and cfg.gap_for("B", "A") == cfg.gap
    assert reply_gaps(["B", "A", "B", "A"], [(0, 1), (0.8, 2), (2.5, 3), (3.4, 4)]) == [-0.2, 0.4]


# --- the ladder with a backchannel, against docs/design.md -------------------------------------------

# docs/design.md's worked example, plus the assistant's "mm-hm" while the user is still asking.
WITH_BACKCHANNEL = EXAMPLE[:3] + [Word("A", "mm-hm", 0.95, 1.2, backchannel=True)] + EXAMPLE[3:]


def test_ladder_of_a_dialogue_with_a_backchannel_is_the_worked_example():
    """The backchannel is in the word stream but not on the floor: every step is the one docs/design.md
    computes for the example without it (t=1.0: 3 words, ratio 0.6, level 1, hint "it's four"; t=1.5:
    ratio 0.8; t=2.0: level 5; t=2.5: generation stops)."""
    steps = ladder(floor_words(WITH_BACKCHANNEL), 0.5)
    assert [(s.timestamp_ms, s.total_word_count, s.current_spoken_ratio, s.level, s.hint) for s in steps] == [
        (1000, 3, 0.6, 1, "it's four"), (1500, 4, 0.8, 2, "it's four"), (2000, 5, 1.0, 5, "it's four")]
    assert steps[0].conversation_context == "B: what is two" and "mm-hm" not in steps[-1].conversation_context
    # Fed to the reference rules as they stand, the "mm-hm" would end the user's run and be the hint:
    naive = reference_ladder(WITH_BACKCHANNEL, 0.5)
    assert naive[0]["hint"] == "mm-hm" or naive[0]["conversation_context"].endswith("A: mm-hm")


def test_oracle_stage_reads_the_floor_and_the_metrics_agree():
    d = Dialogue("bc-v0", "bc", "test", "misc", 0, [Turn("user", "B", "what is two plus two", "what is two plus two"),
                                                   Turn("assistant", "A", "it's four", "it's four")])
    r = RenderedDialogue(d, np.zeros((int(3.0 * 24000), 2), np.int16), 24000, list(WITH_BACKCHANNEL),
                         [TurnTiming(0.0, 1.6, "v"), TurnTiming(2.0, 2.7, "v")])
    with LoopbackServer() as srv:
        st = OracleStage(OracleConfig(backend=BackendConfig(kind="openai", model="m", base_url=srv.base_url)))
        out = run_flat(st, [r])
    sample = out[0]
    assert isinstance(sample, Sample)
    floor = [dict(s, prediction=None) for s in reference_ladder(floor_words(WITH_BACKCHANNEL), 0.5, target=0)]
    got = [{**e.to_dict(), "prediction": None} for e in sample.oracle]
    assert got == floor
    words = [w.to_dict() for w in WITH_BACKCHANNEL]
    events = [e.to_dict() for e in sample.oracle]
    assert true_replies(words, [{**e, "hint": ""} for e in events]) == ["it's four"] * 3
    assert sample.oracle[-1].prediction == "it's four"  # level 5: the true reply itself


def test_fit_gaps_from_an_export_and_back_into_a_recipe(tmp_path):
    import json
    import subprocess

    import yaml

    from kame_data.dataset.fit_gaps import corpus_gaps, fit_histogram, gaps_of, turns_of
    from tests.conftest import CLI

    rng = random.Random(0)
    (tmp_path / "text").mkdir()
    for i in range(30):
        t, words = 0.3, []
        for speaker in ("B", "A", "B", "A"):
            for k in range(5):
                words.append({"speaker": speaker, "word": f"w{k}", "start": round(t, 3), "end": round(t + 0.25, 3)})
                t += 0.3
            if speaker == "B":  # a backchannel by A inside nothing: not a turn
                words.append({"speaker": "A", "word": "mm", "start": round(t - 1.0, 3), "end": round(t - 0.8, 3),
                              "backchannel": True})
            t += rng.uniform(-0.2, 0.6) - 0.05 if speaker == "B" else rng.uniform(0.4, 0.9) - 0.05
        (tmp_path / "text" / f"d{i}.json").write_text(json.dumps(words))
    gaps = corpus_gaps(tmp_path)
    assert len(gaps["reply"]) == 60 and len(gaps["other"]) == 30  # B->A twice, A->B once per dialogue
    assert -0.2 <= min(gaps["reply"]) and max(gaps["reply"]) <= 0.6
    assert 0.4 <= min(gaps["other"]) and max(gaps["other"]) <= 0.9
    assert gaps_of(turns_of([{"speaker": "B", "word": "a", "start": 0, "end": 1},
                             {"speaker": "A", "word": "b", "start": 0.8, "end": 2}])) == {"reply": [-0.2], "other": []}
    h = fit_histogram(gaps["reply"], 0.1)
    assert h.edges[0] <= min(gaps["reply"]) and h.edges[-1] >= max(gaps["reply"]) and sum(h.weights) == 60
    r = subprocess.run(CLI + ["fit-gaps", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    speak = yaml.safe_load(r.stdout)["speak"]
    cfg = SpeakConfig(gap=speak["gap"], reply=speak["reply"])  # the printed YAML is a valid recipe section
    assert cfg.reply.own_gap and cfg.gap.distribution == "histogram"
    assert -0.2 - 0.1 <= cfg.reply.gap.quantile(0.05) and cfg.reply.gap.quantile(0.95) <= 0.6 + 0.1
