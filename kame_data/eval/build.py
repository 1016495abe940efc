"""`eval build`: the MT-Bench questions as the model will hear them, so the questions judged are the
questions heard. Each question is cast a voice from the screened user pool (`speech.voices.cast`);
each turn is spoken, heard by the bundled Whisper, and kept when its WER is at most `max_wer`; a turn
above it is spoken again by the pool's next voice, and when none passes, by each again a little slower (PACES;
the best is kept, and flagged, if still none passes).
The end of the user's speech in each clip is recorded: latency is measured from it.

OUT/questions/{id}.json is written per finished question (a killed build resumes there); the set
is OUT/eval_questions.jsonl with OUT/audio/q{id}-t{turn}.wav (24 kHz mono).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from kame_data import atomic
from kame_data.audio import wav_bytes
from kame_data.eval.questions import Question
from kame_data.speech.screen import ReadAloud, hear_aloud

log = logging.getLogger(__name__)

SAMPLE_RATE = 24000
MAX_WER = 0.05
# Every pool voice at its own pace first, then every voice again a little slower: a word Whisper base
# mishears at speed ("influenced settlement" heard as "influence settlement") is often clear when slower.
PACES = (1.0, 0.85)


@dataclass(frozen=True)
class SpokenTurn:
    text: str  # the question's words, as judged
    spoken: str  # as spoken (numbers and symbols as words)
    voice: str  # the voice label that spoke it
    pace: float  # its tempo: 1.0, or PACES' slower one when no voice passed at its own pace
    wer: float
    wer_ok: bool  # wer <= max_wer (False: no pool voice passed; the best one is kept)
    seconds: float  # the clip's length
    speech_end: float  # the last spoken word's end in the clip (the engine's timing, else Whisper's)
    audio: str  # path relative to OUT
    words: list  # [{word, start, end}] in the clip: the engine's timing where it has one, else Whisper's


def timed_words(said: ReadAloud) -> list[dict]:
    """The turn's words with times: the engine's own spans when it timed every word, else Whisper's."""
    from kame_data.text import spoken_tokens

    tokens = [w for w, _ in spoken_tokens(said.spoken)]
    if said.spans and len(said.spans) == len(tokens) and all(s is not None and None not in s for s in said.spans):
        return [{"word": w, "start": round(s[0], 3), "end": round(s[1], 3)} for w, s in zip(tokens, said.spans)]
    return [{"word": h.word.strip(), "start": round(h.start, 3), "end": round(h.end, 3)} for h in said.heard]


def speech_end(words: list[dict], seconds: float) -> float:
    return round(max((w["end"] for w in words), default=seconds), 3)


def build(questions: Sequence[Question], out: Path, pool: Sequence, max_wer: float = MAX_WER, seed: int = 0,
          engine_of: Callable | None = None, aligner=None, progress=None) -> list[dict]:
    """Speak every question's turns (see the module doc); returns the rows of eval_questions.jsonl."""
    from kame_data.speech.voice import faster, open_engine
    from kame_data.speech.voices import cast

    out = Path(out)
    (out / "questions").mkdir(parents=True, exist_ok=True)
    engines: dict = {}

    def engine(voice):
        if voice not in engines:
            engines[voice] = (engine_of or open_engine)(voice)
        return engines[voice]

    def hear(voice, text):
        nonlocal aligner
        if aligner is None:
            from kame_data.speech.whisper import WhisperAligner

            aligner = WhisperAligner()
        return hear_aloud(engine(voice), aligner, text, SAMPLE_RATE)

    rows = []
    for q in questions:
        done = out / "questions" / f"{q.question_id}.json"
        if done.is_file():
            rows.append(json.loads(done.read_text("utf-8")))
            if progress:
                progress(1)
            continue
        order = cast(pool, f"{seed}:mt_bench:{q.question_id}")
        turns = []
        for t, text in enumerate(q.turns, 1):
            tried: list[tuple[float, int, object, float, ReadAloud]] = []
            for k, (voice, pace) in enumerate((v, p) for p in PACES for v in order):
                said = hear(faster(voice, pace) if pace != 1.0 else voice, text)
                tried.append((said.wer, k, voice, pace, said))
                if said.wer <= max_wer:
                    break
            wer, _, voice, pace, said = min(tried, key=lambda x: (x[0], x[1]))
            if voice != order[0]:
                order = [voice] + [v for v in order if v != voice]  # the next turn tries this voice first
            rel = f"audio/q{q.question_id}-t{t}.wav"
            atomic.write_bytes(out / rel, wav_bytes(said.audio, SAMPLE_RATE))
            words, seconds = timed_words(said), round(len(said.audio) / SAMPLE_RATE, 3)
            turns.append(SpokenTurn(text, said.spoken, voice.label, pace, round(wer, 4), wer <= max_wer, seconds,
                                    speech_end(words, seconds), rel, words))
            if wer > max_wer:
                log.warning("eval build: question %s turn %d: no pool voice under %.0f%% WER (best %s at %.1f%%)",
                            q.question_id, t, 100 * max_wer, voice.label, 100 * wer)
        row = {"question_id": q.question_id, "category": q.category, "turns": [asdict(x) for x in turns],
               "reference": list(q.reference)}
        atomic.write_json(done, row)
        rows.append(row)
        if progress:
            progress(1)
    atomic.write_jsonl(out / "eval_questions.jsonl", rows)
    return rows


def read_built(out: Path) -> list[dict]:
    """The rows of a built question set (OUT/eval_questions.jsonl)."""
    path = Path(out) / "eval_questions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a built question set (run `kame-data eval build` first)")
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
