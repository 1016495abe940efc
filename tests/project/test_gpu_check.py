"""benchmarks/gpu_check.py: where no GPU is lent its vLLM part says so plainly, and its trainer
part (the real Trainer, streaming loader and optimizer) runs in the tiny configuration on the CPU."""

import json
import os
import subprocess
import sys

import pytest

from kame_data.train import missing_dependencies
from tests.conftest import ROOT


@pytest.mark.slow
@pytest.mark.skipif(bool(missing_dependencies()), reason="the trainer part needs the train extra")
def test_gpu_check_runs_its_trainer_part_on_the_cpu_and_names_the_gpu_need(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: run the script itself")
    out = tmp_path / "gpu.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--tiny", "--device", "cpu",
                        "--train-steps", "3", "--frames", "50", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "vLLM part: skipped: it needs a GPU (CUDA is not available on this machine)." in r.stdout
    assert "trainer part: tiny" in r.stdout and "step time" in r.stdout
    res = json.loads(out.read_text())
    assert res["vllm"] is None
    t = res["trainer"]
    assert t["preset"] == "tiny" and t["device"] == "cpu" and len(t["losses"]) == 3 and t["step_s"] > 0
    assert all(0 < x < 20 for x in t["losses"])
    # The real-size model needs a GPU: asked for on the CPU, the script refuses with a reason.
    r2 = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu"],
                        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r2.returncode == 2 and "use --tiny" in r2.stderr


def test_gpu_speech_check_measures_the_cpu_and_names_what_a_gpu_needs(tmp_path):
    """benchmarks/gpu_speech_check.py on real piper speech: Whisper QA (packed, a failed turn heard
    again alone) and DNSMOS on the CPU, each GPU row marked unmeasured with its reason; the clips it
    saves read back for a machine without the TTS stack."""
    from kame_data import accelerator

    if accelerator._whisper_gpus() or accelerator._onnx_cuda():
        pytest.skip("a GPU is here: run the script itself")
    script = str(ROOT / "benchmarks" / "gpu_speech_check.py")
    out, clips = tmp_path / "speech.json", tmp_path / "clips.npz"
    r = subprocess.run([sys.executable, script, "--turns", "3", "--save-clips", str(clips), "--json", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert {(row["piece"], row["device"]) for row in res["rows"]} == {("tts joe", "cpu"), ("whisper QA", "cpu"),
                                                                      ("DNSMOS", "cpu")}
    assert all(row["cpu_per_audio_s"] > 0 and row["wall_per_audio_s"] > 0 for row in res["rows"])
    assert res["audio_s"] > 5
    assert "whisper on a GPU: unmeasured (CTranslate2 here sees no CUDA GPU)" in res["notes"]
    assert any(n.startswith("DNSMOS on a GPU: unmeasured") and "onnxruntime-gpu" in n for n in res["notes"])
    wer = next(n for n in res["notes"] if n.startswith("whisper on the CPU"))
    assert float(wer.rsplit(" ", 1)[1]) <= 0.1  # piper's Joe, heard as QA hears it
    r = subprocess.run([sys.executable, script, "--clips", str(clips), "--pieces", "dnsmos", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert [row["piece"] for row in json.loads(out.read_text())["rows"]] == ["DNSMOS"]
