"""espeak-ng formant voices through the C library (ctypes); exact word events with char offsets.

espeak-ng keeps global state, so calls are serialised by a lock. It also keeps synthesis state in
static variables (pitch flutter, wave phase) that carry over from one call to the next and survive
espeak_Terminate: the same text would sound slightly different depending on what was spoken
before, and with worker processes on which worker spoke it. So the library is loaded afresh for
every synthesis (dlclose, then dlopen: about 5 ms). And espeak_Initialize seeds the C library's
random generator (its pitch flutter) from the clock: the same text came out a little different
from one second to the next. The generators are seeded with a constant after every
initialisation, so the same text gives the same samples.
"""

from __future__ import annotations

import _ctypes
import ctypes
import threading

import numpy as np

from kame_data.speech.engine_spec import EngineCheck, EngineSpec, ProcessLibrary, Tempo
from kame_data.speech.synthesis import Span, Synthesis
from kame_data.text import spoken_tokens

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EVENT_LIST_TERMINATED = 0
_EVENT_WORD = 1
_RATE, _PITCH = 1, 3
_LIBC = ctypes.CDLL(None)  # this process's C library: espeak-ng also calls its rand()


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    ]


_Callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


class _Library(ProcessLibrary):
    """espeak-ng for this process: where it is, and one synthesis at a time on a fresh load."""

    _instance: "_Library | None" = None
    lock = threading.Lock()

    def __init__(self):
        try:
            import espeakng_loader
        except ImportError as e:
            raise RuntimeError("espeak voices need `pip install espeakng-loader`") from e
        self.path = espeakng_loader.get_library_path()
        self.data = espeakng_loader.get_data_path().encode()
        self.sample_rate = 0
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[int, int]] = []  # (char position, 1-based; sample)
        self._callback = _Callback(self._on_audio)  # keep a reference: ctypes does not

    def _on_audio(self, wav, n, events) -> int:
        if n > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, (n,)).copy())
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            if events[i].type == _EVENT_WORD:
                self._events.append((events[i].text_position, events[i].sample))
            i += 1
        return 0

    def speak(self, text: str, voice: str, rate: int, pitch: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
        with self.lock:
            lib = ctypes.CDLL(self.path)
            try:
                self.sample_rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, self.data, 0)
                if self.sample_rate <= 0:
                    raise RuntimeError("espeak-ng failed to initialise")
                # espeak_Initialize seeds espeak's own generator (and maybe the C library's) from the clock
                lib.espeak_ng_SetRandSeed(0)
                _LIBC.srand(0)
                lib.espeak_SetSynthCallback(self._callback)
                if lib.espeak_SetVoiceByName(voice.encode()) != 0:
                    raise RuntimeError(f"espeak-ng has no voice {voice!r} (try en-us, en-us+f3, en-gb-x-rp+m3, en-029, …)")
                lib.espeak_SetParameter(_RATE, rate, 0)
                lib.espeak_SetParameter(_PITCH, pitch, 0)
                self._chunks, self._events = [], []
                data = text.encode("utf-8")
                lib.espeak_Synth(ctypes.c_char_p(data), ctypes.c_size_t(len(data) + 1), 0, _POS_CHARACTER, 0,
                                 _CHARS_UTF8, None, None)
                lib.espeak_Synchronize()
            finally:
                lib.espeak_Terminate()
                _ctypes.dlclose(lib._handle)
            audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
            return audio, list(self._events)


class EspeakEngine:
    def __init__(self, voice: str, threads: int | None = None, *, rate: int, pitch: int):
        """`threads` is not used: espeak-ng synthesises on the calling thread."""
        self.voice, self.rate, self.pitch = voice, rate, pitch
        self.library = _Library.get()
        self.library.speak("test", voice, rate, pitch)  # fail early on a bad voice name

    def synthesize(self, text: str) -> Synthesis:
        audio, events = self.library.speak(text, self.voice, self.rate, self.pitch)
        sr = self.library.sample_rate
        tokens = spoken_tokens(text)
        starts: list[float | None] = [None] * len(tokens)
        # Word events carry the 1-based character position of the word in the text.
        offsets = [off for _, off in tokens]
        for pos, sample in events:
            char = pos - 1
            # the token whose text contains this character (events may point at leading punctuation)
            k = next((i for i in range(len(tokens) - 1, -1, -1) if offsets[i] <= char + 1), None)
            if k is None:
                k = 0
            if starts[k] is None:
                starts[k] = sample / sr
        spans: list[Span] = [(s, None) for s in starts]
        return Synthesis(audio.astype(np.float32) / 32768.0, sr, spans)


SPEC = EngineSpec(
    name="espeak", loader=EspeakEngine, knobs=("rate", "pitch"), timed=True,
    tempo=Tempo("rate", whole=True),
    words_per_second=2.75,  # espeak-ng speaks `rate` words a minute: 165 by default
    probe="general",  # rules and a formant synthesiser in C, no network
    check=EngineCheck("espeak-ng", ("espeakng-loader",),
                      "install espeakng-loader (kame-data[tts]) or Debian's libespeak-ng1", voice="en-us+f3"),
)
