"""The speak stage: each turn through its role's voice, resampled, normalised and mixed."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from kame_data.records import ASSISTANT, USER, Dialogue, RenderedDialogue, Reject, TurnTiming, Word
from kame_data.script.normalize import spoken_tokens
from kame_data.speech.engines import TTSEngine, VoiceConfig, open_engine
from kame_data.speech.mix import SpokenTurn, loudness_normalise, mix_turns
from kame_data.speech.timing import complete_spans

WORDS_PER_SECOND = 2.6  # conservative speaking-rate estimate, to refuse over-long turns before synthesis


@dataclass(frozen=True)
class SpeakConfig:
    sample_rate: int = 24000
    assistant: VoiceConfig = field(default_factory=lambda: VoiceConfig(engine="piper", voice="joe"))
    user: VoiceConfig = field(default_factory=lambda: VoiceConfig(engine="espeak", voice="en-us+f3", rate=165))
    gap: tuple[float, float] = (0.25, 0.8)  # seconds between one speaker's last word and the next's first
    lead_in: float = 0.3
    tail: float = 0.4
    target_dbfs: float = -20.0
    max_turn_seconds: float = 90.0


def _resample(audio: np.ndarray, sr: int, target: int) -> np.ndarray:
    if sr == target or not len(audio):
        return audio.astype(np.float32)
    import soxr

    return soxr.resample(audio.astype(np.float32), sr, target, quality="HQ").astype(np.float32)


class SpeakStage:
    """Renders dialogues. Engines load once per stage instance (`open`)."""

    name = "speak"

    def __init__(self, cfg: SpeakConfig, seed: int = 0):
        self.cfg = cfg
        self.seed = seed
        self.engines: dict[str, TTSEngine] = {}

    def open(self) -> None:
        for role, voice in ((ASSISTANT, self.cfg.assistant), (USER, self.cfg.user)):
            if role not in self.engines:
                self.engines[role] = open_engine(voice)

    def _speak_turn(self, role: str, speaker: str, spoken: str) -> SpokenTurn:
        engine = self.engines[role]
        syn = engine.synthesize(spoken)
        tokens = spoken_tokens(spoken)
        spans = complete_spans(syn.spans, [len(w) for w, _ in tokens], syn.audio, syn.sample_rate)
        audio = loudness_normalise(_resample(syn.audio, syn.sample_rate, self.cfg.sample_rate), self.cfg.target_dbfs)
        duration = len(audio) / self.cfg.sample_rate
        spans = [(min(s, duration), min(e, duration)) for s, e in spans]
        return SpokenTurn(speaker, audio, [w for w, _ in tokens], spans, engine.label)

    def render(self, dialogue: Dialogue) -> RenderedDialogue | Reject:
        for k, turn in enumerate(dialogue.turns):
            n_words = len(spoken_tokens(turn.spoken))
            if n_words == 0:
                return Reject(self.name, dialogue.id, "empty_text", f"turn {k} has no words to speak")
            if n_words / WORDS_PER_SECOND > self.cfg.max_turn_seconds:
                return Reject(self.name, dialogue.id, "too_long",
                              f"turn {k}: about {n_words / WORDS_PER_SECOND:.0f} s > {self.cfg.max_turn_seconds:.0f} s")
        spoken = [self._speak_turn(t.role, t.speaker, t.spoken) for t in dialogue.turns]
        for k, s in enumerate(spoken):
            if not len(s.audio) or float(np.max(np.abs(s.audio))) < 1e-3:
                return Reject(self.name, dialogue.id, "silent_audio", f"turn {k} synthesised to silence")
        rng = random.Random(f"{self.seed}:gap:{dialogue.id}")
        gaps = [rng.uniform(*self.cfg.gap) for _ in spoken[1:]]
        pcm, words, timings = mix_turns(spoken, gaps, self.cfg.sample_rate, self.cfg.lead_in, self.cfg.tail)
        return RenderedDialogue(
            dialogue=dialogue,
            audio=pcm,
            sample_rate=self.cfg.sample_rate,
            words=[Word(speaker=s, word=w, start=a, end=b) for s, w, a, b in words],
            timings=[TurnTiming(start=a, end=b, voice=s.voice) for (a, b), s in zip(timings, spoken)],
        )

    def process(self, batch: list[Dialogue]) -> list[RenderedDialogue | Reject]:
        self.open()
        return [self.render(d) for d in batch]
