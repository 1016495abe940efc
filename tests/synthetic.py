"""Rendered dialogues without TTS: realistic word timings and silent audio (the oracle stage never
reads audio). For dry runs of oracle settings, benchmarks and tests."""

import random

import numpy as np

from kame_data.records import Dialogue, RenderedDialogue, Turn, TurnTiming, Word

VOCAB = ("which planet is known as the red one could it be mars or venus maybe jupiter i think "
         "answer because iron oxide covers surface so that makes sense yes right okay").split()


def synthetic_dialogue(i: int, seed: int = 0, user_words: int = 18, assistant_words: int = 14) -> RenderedDialogue:
    rng = random.Random(f"{seed}:{i}")
    t = 0.3
    words = []
    turns = []
    timings = []
    for speaker, role, n in (("B", "user", user_words + rng.randint(-4, 4)), ("A", "assistant", assistant_words)):
        texts = []
        first = len(words)
        for _ in range(n):
            d = rng.uniform(0.15, 0.45)
            w = rng.choice(VOCAB)
            words.append(Word(speaker, w, round(t, 3), round(t + d, 3)))
            texts.append(w)
            # Pauses stay short of the ladder's 1.0 s run rule (pause + a word of at most 0.45 s).
            t += d + (min(rng.uniform(0.2, 0.6), 0.5) if rng.random() < 0.1 else 0.02)
        turns.append(Turn(role, speaker, " ".join(texts), " ".join(texts)))
        timings.append(TurnTiming(words[first].start, words[-1].end, "none"))
        t += rng.uniform(0.3, 0.8)
    sr = 24000
    d = Dialogue(f"synthetic-{i}-v0", f"synthetic-{i}", "synthetic", "misc", 0, turns)
    return RenderedDialogue(d, np.zeros((int((t + 0.5) * sr), 2), np.int16), sr, words, timings)


def timed_dialogue(dialogue: Dialogue, seed: int = 0) -> RenderedDialogue:
    """A scripted dialogue (real text, e.g. from the fixtures) with synthetic word timings: words of
    0.2-0.45 s, a short pause between turns. The oracle ladder reads only the words."""
    from kame_data.text import spoken_words

    rng = random.Random(f"{seed}:{dialogue.id}")
    t, words, timings = 0.3, [], []
    for turn in dialogue.turns:
        start = t
        for w in spoken_words(turn.spoken):
            d = rng.uniform(0.2, 0.45)
            words.append(Word(turn.speaker, w, round(t, 3), round(t + d, 3)))
            t += d + 0.03
        timings.append(TurnTiming(round(start, 3), round(t, 3), "none"))
        t += rng.uniform(0.2, 0.7)
    sr = 24000
    return RenderedDialogue(dialogue, np.zeros((int((t + 0.5) * sr), 2), np.int16), sr, words, timings)


def fixture_dialogues(n: int, seed: int = 1234) -> list[RenderedDialogue]:
    """The first `n` template dialogues of the fixtures' real rows (MMLU-Pro, GSM8K and our own
    HSSBench-format rows, interleaved), with synthetic timings."""
    from pathlib import Path

    from kame_data.recipe import load_recipe
    from kame_data.script.config import ScriptConfig
    from kame_data.script.template import script_batch
    from kame_data.sources import load_items
    from kame_data.sources.config import FilterConfig

    recipe = load_recipe(Path(__file__).resolve().parent.parent / "benchmarks" / "recipes" / "oracle_fixtures.yaml")
    items, _ = load_items(recipe, FilterConfig(), limit=2 * n + 6)
    dialogues = [d for d in script_batch(items, ScriptConfig(), seed) if isinstance(d, Dialogue)]
    return [timed_dialogue(d, seed) for d in dialogues[:n]]


def voiced(rendered: RenderedDialogue, seed: int = 0) -> RenderedDialogue:
    """The dialogue with a tone per word on its speaker's channel (a pitch per word, so a codec
    hears something that follows the words) instead of silence."""
    from dataclasses import replace

    from kame_data.records import CHANNEL

    sr = rendered.sample_rate
    audio = np.zeros_like(rendered.audio, dtype=np.float32)
    for w in rendered.words:
        a, b = int(w.start * sr), int(w.end * sr)
        pitch = 120.0 + (sum(map(ord, w.word)) * 37 + seed) % 400
        audio[a:b, CHANNEL[w.speaker]] += 0.3 * np.sin(2 * np.pi * pitch * np.arange(b - a) / sr)
    return replace(rendered, audio=(audio * 32767).astype(np.int16))


def spoken_dataset(out, n: int = 3, seed: int = 0, latency: str = "ideal"):
    """A small dataset in `kame-data run`'s layout (shards by ShardWriter, a manifest with the
    oracle settings) of voiced synthetic dialogues whose oracle predictions are the true replies:
    what the trainer and `kame-data infer` read, without TTS or an LLM. `latency`: an
    oracle.latency preset; rows then carry oracle_arrival, as the write step gives them."""
    import json
    from pathlib import Path

    from kame_data.dataset.rows import sample_row
    from kame_data.dataset.shards import ShardWriter
    from kame_data.oracle.ladder import ladder
    from kame_data.oracle.latency import parse_latency
    from kame_data.records import CHANNEL, OracleEvent, Sample

    out = Path(out)
    model = parse_latency(latency)
    w = ShardWriter(out, rows_per_shard=n, arrival=not model.ideal)
    for i in range(n):
        r = voiced(synthetic_dialogue(i, seed, user_words=12, assistant_words=10), seed)
        events = [OracleEvent(s.timestamp_ms, s.conversation_context, s.true_reply, s.total_word_count,
                              s.trigger_word, s.recent_words, s.current_spoken_ratio, s.channel, s.hint, s.level)
                  for s in ladder(r.words, 0.5, CHANNEL["A"], CHANNEL)]
        w.add(sample_row(Sample(r, events), model, seed))
    oracle = {"interval": 0.5, "target": "assistant", **({"latency": latency} if not model.ideal else {})}
    (out / "manifest.json").write_text(json.dumps({"shards": w.finish(), "recipe": {"oracle": oracle}}))
    return out
