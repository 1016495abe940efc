"""The recipe's `device` (kame_data/accelerator.py): `auto` runs on the CPU where no GPU is usable and
says so in the manifest; `cuda` there stops the run at its start with what to do, before any
model loads; a placement on the CPU leaves the speech steps' identity as it was."""

import json
import os
import subprocess

import pytest
import yaml

from kame_data import accelerator
from kame_data.speech.post import QualityStage
from kame_data.speech.config import QualityConfig
from tests.conftest import CLI, FIXTURES
from tests.loopback_server import LoopbackServer

GPU = accelerator._whisper_gpus() > 0 or accelerator._onnx_cuda()
cpu_only = pytest.mark.skipif(GPU, reason="this machine has a GPU a speech model can use")


def _recipe(tmp_path, device: str, base_url: str) -> str:
    raw = {"name": "devices", "seed": 1, "device": device,
           "sources": [{"kind": "gsm8k", "path": str(FIXTURES / "gsm8k_test_200.jsonl"), "limit": 1}],
           "speak": {"assistant": {"engine": "espeak", "voice": "en-us"},
                     "user": {"engine": "espeak", "voice": "en-us+f3"}, "workers": 1},
           "oracle": {"backend": {"kind": "openai", "model": "loopback", "base_url": base_url}}}
    path = tmp_path / f"{device}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@cpu_only
def test_auto_is_the_cpu_here_and_cuda_names_what_is_missing(monkeypatch):
    monkeypatch.setenv(accelerator.ENV, "auto")
    assert accelerator.placement() == {"requested": "auto", "whisper": "cpu", "onnx": "cpu"}
    assert accelerator.whisper_device() == ("cpu", "int8")
    assert accelerator.onnx_providers() == ["CPUExecutionProvider"]
    monkeypatch.setenv(accelerator.ENV, "cuda")
    with pytest.raises(accelerator.DeviceUnavailable, match="CTranslate2"):
        accelerator.whisper_device()
    with pytest.raises(accelerator.DeviceUnavailable, match="onnxruntime-gpu"):
        accelerator.onnx_providers()
    monkeypatch.setenv(accelerator.ENV, "gpu")
    with pytest.raises(accelerator.DeviceUnavailable, match="auto, cpu, cuda"):
        accelerator.requested()


@cpu_only
def test_a_cpu_placement_keeps_the_steps_identity(monkeypatch):
    """Checkpoints made before `device` existed stay valid on the CPU."""
    ids = {}
    for device in ("cpu", "auto"):
        monkeypatch.setenv(accelerator.ENV, device)
        ids[device] = QualityStage(QualityConfig()).identity()
    assert ids["cpu"] == ids["auto"] and "devices" not in ids["auto"]


@cpu_only
def test_a_gpu_whisper_cannot_use_puts_it_on_the_cpu_everywhere_the_run_looks(monkeypatch):
    """CTranslate2 may count a GPU it cannot compute on (seen on a CUDA 13 machine: no cuBLAS 12).
    Made to count one here, it really fails on the GPU it lacks: the run's probe then puts Whisper on
    the CPU for every process (the environment), the manifest's placement and the step identity;
    with `device: cuda` the same probe is an error."""
    from kame_data.speech import whisper

    monkeypatch.setattr(accelerator, "_whisper_gpus", lambda: 1)
    monkeypatch.delenv(accelerator.WHISPER_ENV, raising=False)
    monkeypatch.setenv(accelerator.ENV, "auto")
    assert accelerator.whisper_device() == ("cuda", "float16")  # what CTranslate2's count alone says
    error = accelerator.settle(whisper.gpu_error)
    assert error and os.environ[accelerator.WHISPER_ENV] == "cpu"
    assert accelerator.whisper_device() == ("cpu", "int8")
    assert accelerator.placement()["whisper"] == "cpu" and accelerator.identity() == {}
    assert whisper.WhisperAligner(1).device == "cpu"  # a worker process inherits the decision
    monkeypatch.setenv(accelerator.ENV, "cuda")
    with pytest.raises(accelerator.DeviceUnavailable, match="Whisper cannot run on the GPU"):
        accelerator.settle(whisper.gpu_error)
    monkeypatch.setenv(accelerator.ENV, "cpu")
    assert accelerator.settle(whisper.gpu_error) == "" and accelerator.WHISPER_ENV not in os.environ


@cpu_only
def test_a_run_records_where_its_models_ran_and_cuda_stops_before_any_work(tmp_path):
    with LoopbackServer() as srv:
        out = tmp_path / "auto"
        r = subprocess.run(CLI + ["run", _recipe(tmp_path, "auto", srv.base_url), "--out", str(out), "-q"],
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["devices"] == {"requested": "auto", "whisper": "cpu", "onnx": "cpu"}
        assert manifest["counts"]["samples"] == 1

        calls = srv.calls
        out = tmp_path / "cuda"
        r = subprocess.run(CLI + ["run", _recipe(tmp_path, "cuda", srv.base_url), "--out", str(out), "-q"],
                           capture_output=True, text=True, timeout=900)
        assert r.returncode != 0
        assert "device: cuda" in r.stderr and "device: auto" in r.stderr
        assert not (out / "data").exists() and not (out / ".checkpoints").exists()
        assert srv.calls == calls  # no oracle call either


@cpu_only
def test_the_doctor_checks_whisper_where_the_recipe_puts_it(tmp_path):
    for device, ok in (("auto", True), ("cuda", False)):
        recipe = _recipe(tmp_path, device, "http://127.0.0.1:9")  # the doctor calls no oracle
        r = subprocess.run(CLI + ["doctor", "--recipe", recipe, "--only", "whisper"], capture_output=True, text=True,
                           timeout=600, env={**os.environ, "COLUMNS": "250"})
        assert (r.returncode == 0) == ok, r.stdout + r.stderr
        if ok:
            assert "on the CPU (device: auto)" in r.stdout
        else:
            # the speech models are installed: what to do is the device, not an install
            assert "whisper: device: cuda, but" in r.stdout and "use device: auto" in r.stdout
            assert "install the QA extra" not in r.stdout
