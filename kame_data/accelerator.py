"""Where the speech models run: the recipe's `device` (docs/design.md, "Devices").

`auto` (the default) puts Whisper (CTranslate2) and the ONNX models that do most of the work (the TTS
engines and DNSMOS) on a CUDA GPU when this process can use one, and on the CPU otherwise; `cpu`
keeps them there; `cuda` stops the run at its start where a piece cannot reach a GPU. The small
per-frame models (Silero VAD, the speaker encoder) stay on the CPU: a GPU call costs more than
their work.

Why an environment variable: every worker process (local or Ray) loads its own models, and the
runner sets the choice before it starts any of them; spawned processes inherit it.
"""

from __future__ import annotations

import functools
import os
from typing import Callable

ENV = "KAME_DATA_DEVICE"
# "cpu" where the run's probe found that Whisper cannot compute on the GPU CTranslate2 sees (no
# cuBLAS, say): every process, the manifest and the step identity then say the CPU (`settle`).
WHISPER_ENV = "KAME_DATA_WHISPER_DEVICE"
CHOICES = ("auto", "cpu", "cuda")
CPU = ["CPUExecutionProvider"]
CUDA = ["CUDAExecutionProvider", "CPUExecutionProvider"]


class DeviceUnavailable(RuntimeError):
    """`device: cuda` where a speech model cannot reach a GPU."""


def requested() -> str:
    value = os.environ.get(ENV, "auto") or "auto"
    if value not in CHOICES:
        raise DeviceUnavailable(f"{ENV}={value!r}: use one of {', '.join(CHOICES)}")
    return value


@functools.cache
def _whisper_gpus() -> int:
    try:
        import ctranslate2

        return ctranslate2.get_cuda_device_count()
    except Exception:  # not installed, or no driver: the CPU it is
        return 0


@functools.cache
def _onnx_cuda() -> bool:
    try:
        import onnxruntime as ort

        return "CUDAExecutionProvider" in ort.get_available_providers()
    except Exception:
        return False


def whisper_device() -> tuple[str, str]:
    """(device, compute_type) for faster-whisper: float16 on a GPU, int8 on the CPU."""
    want = requested()
    if want != "cpu" and _whisper_gpus() > 0 and os.environ.get(WHISPER_ENV) != "cpu":
        return "cuda", "float16"
    if want == "cuda":
        raise DeviceUnavailable("device: cuda, but CTranslate2 (Whisper) sees no CUDA GPU: check the driver, "
                                "or use device: auto to run Whisper on the CPU")
    return "cpu", "int8"


def settle(whisper_gpu_error: Callable[[], str]) -> str:
    """Decide, once, before any step or worker loads a model, whether Whisper runs on the GPU:
    CTranslate2 counts a GPU it may not be able to use (it opens cuBLAS at the first product, not at
    load), so `whisper_gpu_error` tries it ('' when it works). A GPU Whisper cannot use puts it on
    the CPU for the whole run, in every process (WHISPER_ENV, inherited), and the manifest and step
    identity say so; with `device: cuda` it is an error. Returns the error ('' when none)."""
    os.environ.pop(WHISPER_ENV, None)
    if whisper_device()[0] == "cpu":
        return ""
    error = whisper_gpu_error()
    if error:
        if requested() == "cuda":
            raise DeviceUnavailable(f"device: cuda, but Whisper cannot run on the GPU CTranslate2 sees: {error}")
        os.environ[WHISPER_ENV] = "cpu"
    return error


def onnx_providers() -> list[str]:
    """onnxruntime's providers for the TTS engines and DNSMOS (CPU last: onnxruntime falls back to
    it for any operator the GPU provider lacks)."""
    want = requested()
    if want != "cpu" and _onnx_cuda():
        return list(CUDA)
    if want == "cuda":
        raise DeviceUnavailable("device: cuda, but onnxruntime has no CUDA provider: install onnxruntime-gpu "
                                "in place of onnxruntime, or use device: auto to run the ONNX models on the CPU")
    return list(CPU)


def placement() -> dict[str, str]:
    """What the request comes to on this machine (the manifest's `devices`)."""
    return {"requested": requested(), "whisper": whisper_device()[0],
            "onnx": "cuda" if onnx_providers() == CUDA else "cpu"}


def identity() -> dict[str, str]:
    """A speech step's identity beside its config: empty on the CPU (so checkpoints and caches made
    before devices existed stay valid), the placement where any piece runs on a GPU: its floats
    differ from the CPU's, and a resumed run must not mix the two."""
    p = placement()
    return {} if p["whisper"] == p["onnx"] == "cpu" else {"devices": f"whisper:{p['whisper']},onnx:{p['onnx']}"}
