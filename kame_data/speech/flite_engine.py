"""flite (CMU, Debian `flite`/`libflite1`): four more English speakers, timed word by word.

flite is an optional engine: a Debian package, not a wheel, so a pip-only machine lacks it
(`kame-data doctor` says so, `make setup` installs it where it can, and a default pool drops its
voices with a line saying what is missing: speech/voices.py `available`). Its voices are built
into the library: `kal16` (diphone), `awb` (Scottish), `rms` and `slt` (clustergen); `kal` is the
8 kHz diphone voice.

libflite is called through ctypes: `flite_synth_text` gives an utterance whose Token relation
holds the text's whitespace-separated tokens (with `file_pos`, the byte after the token's
delimiter), each with its words as daughters; a word's syllables and segments (SylStructure) end
at times in seconds (the Segment relation's `end`). A token's span runs from the end of the
segment before its first word's first segment to the end of its last word's last segment, so the
pauses flite inserts fall outside every word. A text is spoken phrase by phrase (`phrases`: flite
runs a list of options into one breath, and Whisper mishears it). The 16 kHz output is resampled to
24 kHz like every other engine's (audio.resample: soxr). Clustergen voices draw their unvoiced
excitation from the C library's rand(): it is seeded with a constant before every synthesis, so
the same text gives the same samples in any process (as espeak_engine.py does). Calls are
serialised by a lock: the voices' features and the generator are shared state.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import re
import threading
from pathlib import Path

import numpy as np

from kame_data.audio import resample
from kame_data.speech.engine_spec import EngineCheck, EngineSpec, ProcessLibrary, Tempo
from kame_data.speech.synthesis import Span, Synthesis
from kame_data.text import spoken_tokens

RATE = 24000  # what the engine hands back, like the other engines (flite itself speaks at 16 kHz; kal at 8)
VOICES = ("awb", "rms", "slt", "kal16", "kal")
EDGE = (0.05, 0.1)  # seconds of silence kept before the first word and after the last, per phrase
PHRASE_PAUSE, SENTENCE_PAUSE = 0.12, 0.3  # seconds added between phrases (after , ; :) and sentences
_BREAK = re.compile(r"(?<=[,;:.?!])\s+")
PACKAGE = "flite (Debian: apt-get install flite)"


class _Wave(ctypes.Structure):
    _fields_ = [("type", ctypes.c_char_p), ("sample_rate", ctypes.c_int), ("num_samples", ctypes.c_int),
                ("num_channels", ctypes.c_int), ("samples", ctypes.POINTER(ctypes.c_short))]


class _Voice(ctypes.Structure):  # the head of cst_voice: its name and its features
    _fields_ = [("name", ctypes.c_char_p), ("features", ctypes.c_void_p)]


_P, _S = ctypes.c_void_p, ctypes.c_char_p
_LIBC = ctypes.CDLL(None)  # this process's C library: flite's excitation noise calls its rand()
_SIGNATURES = {  # name: (result, arguments)
    "flite_init": (ctypes.c_int, []), "flite_synth_text": (_P, [_S, _P]), "utt_wave": (ctypes.POINTER(_Wave), [_P]),
    "utt_relation": (_P, [_P, _S]), "relation_head": (_P, [_P]), "item_next": (_P, [_P]),
    "item_daughter": (_P, [_P]), "path_to_item": (_P, [_P, _S]), "ffeature_float": (ctypes.c_float, [_P, _S]),
    "ffeature_int": (ctypes.c_int, [_P, _S]), "feat_set_float": (None, [_P, _S, ctypes.c_float]),
    "delete_utterance": (None, [_P]),
}


@functools.cache
def missing() -> str | None:
    """Why flite cannot run here (None: it can). Loads nothing: the linker cache's lookup, once."""
    import ctypes.util

    return None if ctypes.util.find_library("flite") else f"flite is not installed ({PACKAGE})"


class _Library(ProcessLibrary):
    """libflite for this process, and its voices, registered once each."""

    lock = threading.Lock()
    _instance: "_Library | None" = None

    def __init__(self):
        why = missing()
        if why:
            raise RuntimeError(f"flite voices need the Debian package: {why}")
        # the voices' libraries resolve their symbols in libflite and the English front end
        self.lib = ctypes.CDLL("libflite.so.1", mode=ctypes.RTLD_GLOBAL)
        for name in ("libflite_usenglish.so.1", "libflite_cmulex.so.1"):
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = res, args
        self.lib.flite_init()
        self.voices: dict[str, int] = {}

    def voice(self, name: str) -> int:
        with self.lock:
            if name not in self.voices:
                if name not in VOICES:
                    raise RuntimeError(f"flite has no voice {name!r}; the built-in ones are {', '.join(VOICES)}")
                lib = ctypes.CDLL(f"libflite_cmu_us_{name}.so.1")
                register = getattr(lib, f"register_cmu_us_{name}")
                register.restype, register.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
                self.voices[name] = register(None)
            return self.voices[name]

    def speak(self, text: str, voice: int, stretch: float) -> tuple[np.ndarray, int, list[tuple[int, float, float]]]:
        """(16-bit samples, their rate, [(token's file_pos, start s, end s)] for tokens with sounds)."""
        lib = self.lib
        with self.lock:
            lib.feat_set_float(ctypes.cast(voice, ctypes.POINTER(_Voice)).contents.features, b"duration_stretch",
                               stretch)
            _LIBC.srand(0)
            utt = lib.flite_synth_text(text.encode("utf-8"), voice)
            try:
                wave = lib.utt_wave(utt).contents
                audio = np.ctypeslib.as_array(wave.samples, (wave.num_samples,)).copy() if wave.num_samples \
                    else np.zeros(0, np.int16)
                tokens = []
                tok = lib.relation_head(lib.utt_relation(utt, b"Token"))
                while tok:
                    times = []
                    word = lib.item_daughter(tok)
                    while word:
                        first = lib.path_to_item(word, b"R:SylStructure.daughter1.daughter1.R:Segment")
                        last = lib.path_to_item(word, b"R:SylStructure.daughtern.daughtern.R:Segment")
                        if first and last:
                            before = lib.path_to_item(first, b"p")
                            times.append((lib.ffeature_float(before, b"end") if before else 0.0,
                                          lib.ffeature_float(last, b"end")))
                        word = lib.item_next(word)
                    if times:
                        tokens.append((lib.ffeature_int(tok, b"file_pos"), times[0][0], times[-1][1]))
                    tok = lib.item_next(tok)
                return audio, wave.sample_rate, tokens
            finally:
                lib.delete_utterance(utt)


class FliteEngine:
    def __init__(self, voice: str, threads: int | None = None, *, speed: float):
        """`threads` is not used: flite synthesises on the calling thread."""
        self.library = _Library.get()
        self.voice = self.library.voice(voice)
        self.stretch = 1.0 / speed
        self.sample_rate = RATE

    def synthesize(self, text: str) -> Synthesis:
        """The text phrase by phrase (`phrases`), each trimmed to a breath around its words and
        joined with a pause of its punctuation's kind."""
        tokens = spoken_tokens(text)
        spans: list[Span] = [(None, None)] * len(tokens)
        pieces, at = [], 0.0
        for start, phrase, pause in phrases(text):
            audio, sr, timed = self.library.speak(phrase, self.voice, self.stretch)
            audio = audio.astype(np.float32) / 32768.0
            own = _token_spans(phrase, timed)
            if not own:
                continue
            lo = max(0.0, min(a for a, _ in own.values()) - EDGE[0])
            hi = min(len(audio) / sr, max(b for _, b in own.values()) + EDGE[1])
            for k, (_, offset) in enumerate(tokens):
                if offset - start in own:
                    a, b = own[offset - start]
                    spans[k] = (at + a - lo, at + b - lo)
            clip = resample(audio[int(round(lo * sr)):int(round(hi * sr))], sr, RATE)
            pieces += [clip, np.zeros(int(pause * RATE), np.float32)]
            at += (len(clip) + int(pause * RATE)) / RATE
        audio = np.concatenate(pieces[:-1]) if pieces else np.zeros(0, np.float32)
        return Synthesis(audio.astype(np.float32), RATE, spans)


def phrases(text: str) -> list[tuple[int, str, float]]:
    """(character offset, phrase, pause after it in seconds) for each phrase of `text`: split after
    a comma, semicolon, colon or sentence end. flite runs a list such as "A, Force; B, Power" into
    one breath ("b power", "or depressure": Whisper heard 18% of the quickstart's user words wrong
    with slt); spoken phrase by phrase, each ends as a phrase does and the next starts clean
    (rms: a median per-turn WER of 6.9% on the quickstart's user turns, 3.7% phrase by phrase)."""
    out, start = [], 0
    for m in list(_BREAK.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        if text[start:end].strip():
            mark = text[end - 1] if end else ""
            out.append((start, text[start:end], SENTENCE_PAUSE if mark in ".?!" else PHRASE_PAUSE))
        start = m.end() if m else len(text)
    return out


def _token_spans(text: str, timed: list[tuple[int, float, float]]) -> dict[int, tuple[float, float]]:
    """{character offset of a whitespace token: its (start, end)}: flite's file_pos of a token is
    the byte just past the character that ended it (the text's end for the last one)."""
    data = text.encode("utf-8")
    chars = {}
    for m in re.finditer(rb"\S+", data):
        chars[m.end() + 1 if m.end() < len(data) else m.end()] = len(data[: m.start()].decode("utf-8"))
    return {chars[pos]: (a, b) for pos, a, b in timed if pos in chars}


# How this module turns text into flite's audio (phrases, pauses, trimming, the seed): part of every
# cached figure's key and of the speak step's checkpoint key, so a change here (bump it) renders and
# measures the voices again.
SOUND_VERSION = 2


@functools.cache
def identity(voice: str) -> str:
    """This module's SOUND_VERSION and a hash of the library file that holds the voice (so cached
    figures follow a changed package or a changed way of speaking)."""
    _Library.get().voice(voice)
    maps = Path("/proc/self/maps").read_text().splitlines()
    path = next((ln.split()[-1] for ln in maps if f"libflite_cmu_us_{voice}.so" in ln), "")
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] if path else "unknown"
    return f"flite-v{SOUND_VERSION}-{digest}"


SPEC = EngineSpec(
    name="flite", loader=FliteEngine, knobs=("speed",), timed=True, tempo=Tempo("speed"),
    words_per_second=2.8,  # slt and rms at their default speed (benchmarks/calibrate.py --only speech: 2.819)
    # core-s per audio-s relative to piper's: 0.0221 against 0.0812 (benchmarks/calibrate.py --only speech,
    # idle 2-core Xeon, 2026-12-07; synthesis phrase by phrase plus the resampling to 24 kHz)
    relative_cost=0.27,
    probe="general",  # a C synthesiser (diphone and clustergen), no network
    identity=identity,
    sound_version=SOUND_VERSION,
    check=EngineCheck("flite", (), "optional: install the Debian package (sudo apt-get install flite; make setup "
                      "does it when it can); without it the default user pool leaves out awb, rms and slt",
                      voice="slt", optional=True, missing=missing),
)
