"""Coqui TTS (`coqui-tts`) models that the user already has on disk.

Coqui downloads its catalogue models on first use, which a run must never do, so a voice here is
a local model: a folder with `config.json` and a checkpoint (`model.pth`, `best_model.pth`,
`checkpoint_*.pth`), or the checkpoint's path with `config.json` beside it. Coqui has no word
timing API (its spec says `timed=False`): the speak step times its words with the Whisper aligner.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kame_data.speech.engine_spec import EngineSpec, Tempo
from kame_data.speech.synthesis import Synthesis
from kame_data.text import spoken_tokens

_CHECKPOINTS = ("model.pth", "best_model.pth", "model_file.pth", "checkpoint.pth")


def model_files(voice: str) -> tuple[Path, Path]:
    """(checkpoint, config.json) of a local Coqui model; a clear error when they are missing."""
    p = Path(voice).expanduser()
    if p.is_file() and p.suffix in (".pth", ".pt"):
        config = p.parent / "config.json"
        if config.is_file():
            return p, config
        raise RuntimeError(f"coqui voice {voice!r}: no config.json beside the checkpoint")
    if p.is_dir():
        config = p / "config.json"
        found = [p / n for n in _CHECKPOINTS if (p / n).is_file()] or sorted(p.glob("checkpoint_*.pth"))
        if config.is_file() and found:
            return found[-1], config
        raise RuntimeError(f"coqui voice {voice!r}: the folder needs config.json and a .pth checkpoint")
    raise RuntimeError(f"coqui voice {voice!r} is not a local model folder or checkpoint; catalogue names "
                       "would be downloaded at run time, which kame-data never does")


class CoquiEngine:
    def __init__(self, voice: str, threads: int | None = None, *, speed: float):
        checkpoint, config = model_files(voice)
        try:
            import torch
            from TTS.utils.synthesizer import Synthesizer
        except ImportError as e:
            raise RuntimeError(f"coqui voices need `pip install kame-data[coqui]` (coqui-tts with torch, "
                               f"torchaudio and torchcodec that load together): {e}") from e
        if threads:
            torch.set_num_threads(threads)
        self.synthesizer = Synthesizer(tts_checkpoint=str(checkpoint), tts_config_path=str(config), use_cuda=False)
        self.sample_rate = int(self.synthesizer.output_sample_rate)
        self.speed = speed

    def synthesize(self, text: str) -> Synthesis:
        import torch

        torch.manual_seed(0)  # VITS samples noise: the same text gives the same audio
        kwargs = {"speed": self.speed} if self.speed != 1.0 else {}
        wav = self.synthesizer.tts(text, split_sentences=True, **kwargs)
        audio = np.asarray(wav, np.float32).reshape(-1)
        return Synthesis(audio, self.sample_rate, [(None, None)] * len(spoken_tokens(text)))


SPEC = EngineSpec(
    name="coqui", loader=CoquiEngine, knobs=("speed",), timed=False, tempo=Tempo("speed"),
    words_per_second=2.7,  # taken as piper's: no separate measurement
    check=None,  # no model ships with kame-data, so the doctor has nothing to render
)
