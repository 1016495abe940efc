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
    for speaker, role, n in (("B", "user", user_words + rng.randint(-4, 4)), ("A", "assistant", assistant_words)):
        texts = []
        for _ in range(n):
            d = rng.uniform(0.15, 0.45)
            w = rng.choice(VOCAB)
            words.append(Word(speaker, w, round(t, 3), round(t + d, 3)))
            texts.append(w)
            t += d + (rng.uniform(0.2, 0.6) if rng.random() < 0.1 else 0.02)
        turns.append(Turn(role, speaker, " ".join(texts), " ".join(texts)))
        t += rng.uniform(0.3, 0.8)
    sr = 24000
    d = Dialogue(f"synthetic-{i}-v0", f"synthetic-{i}", "synthetic", "misc", 0, turns)
    timings = [TurnTiming(words[0].start, words[user_words].end, "none"), TurnTiming(0, 0, "none")]
    return RenderedDialogue(d, np.zeros((int((t + 0.5) * sr), 2), np.int16), sr, words, timings)
