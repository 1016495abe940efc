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
