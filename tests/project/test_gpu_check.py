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
