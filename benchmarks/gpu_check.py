"""The GPU path, in one script to run when a GPU is lent: (1) the vLLM backend as the oracle of
`kame-data run` on N dialogues (calls/s, tokens/s); (2) a few steps of the real-size trainer
(Moshi 7B config, random weights, bf16, AdamW, the streaming loader on token shards): step time.

Without a GPU, part 1 says so and is skipped; part 2 runs on the CPU in the tiny configuration
(`--tiny --device cpu`), which is how the tests keep this script honest.

    python benchmarks/gpu_check.py --vllm-model /models/Qwen2.5-0.5B-Instruct   # on a GPU machine
    python benchmarks/gpu_check.py --tiny --device cpu --train-steps 3          # anywhere
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GSM8K = ROOT / "tests" / "data" / "sources" / "gsm8k_test_200.jsonl"


def cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def vllm_part(tmp: Path, dialogues: int, model: str | None) -> dict | None:
    """The oracle through `kame-data run` on the vLLM backend (speech by espeak: cheap to make)."""
    why = None
    if not cuda():
        why = "it needs a GPU (CUDA is not available on this machine)"
    elif importlib.util.find_spec("vllm") is None:
        why = "vllm is not installed (pip install 'kame-data[vllm]' in a GPU environment of its own)"
    elif not model:
        why = "no --vllm-model given (a local model folder: machines here cannot download one)"
    if why:
        print(f"vLLM part: skipped: {why}.")
        return None
    import yaml

    recipe = {"name": "gpu-check", "seed": 5, "batch_size": 16,
              "sources": [{"kind": "gsm8k", "path": str(GSM8K), "limit": dialogues}],
              "speak": {"assistant": {"engine": "espeak", "voice": "en-us"},
                        "user": {"engine": "espeak", "voice": "en-us+f3"}},
              "oracle": {"interval": 0.5, "backend": {"kind": "vllm", "model": model, "max_tokens": 48}},
              "publish": {"rows_per_shard": 100}}
    path = tmp / "vllm.yaml"
    path.write_text(yaml.safe_dump(recipe))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "kame_data.cli.main", "run", str(path), "--out", str(tmp / "vllm"),
                        "-q", "--no-cache"], capture_output=True, text=True)
    if r.returncode:
        print(f"vLLM part: kame-data run failed:\n{r.stderr[-3000:]}")
        return {"error": r.stderr[-3000:]}
    m = json.loads((tmp / "vllm" / "manifest.json").read_text())
    llm, span = m["llm"], m["wall"]["oracle"]
    tokens = llm.get("prompt_tokens", 0) + llm.get("completion_tokens", 0)
    out = {"dialogues": m["counts"]["samples"], "calls": llm["calls"], "oracle_wall_s": span,
           "calls_per_s": llm["calls"] / span, "tokens_per_s": tokens / span,
           "completion_tokens_per_s": llm.get("completion_tokens", 0) / span, "run_s": time.perf_counter() - t}
    print(f"vLLM part: {out['dialogues']} dialogues, {out['calls']} oracle calls in {span:.1f} s: "
          f"{out['calls_per_s']:.1f} calls/s, {out['tokens_per_s']:,.0f} tokens/s "
          f"({out['completion_tokens_per_s']:,.0f} generated/s)")
    return out


def trainer_part(tmp: Path, tiny: bool, device: str, steps: int, batch: int, frames: int) -> dict:
    """Optimizer steps of the bundled trainer on synthetic token shards of the model's vocabularies."""
    import torch

    from kame_data.train.config import config_from_dict
    from kame_data.train.loop import Trainer
    from kame_data.train.model import lm_kwargs_for
    from kame_data.train.sampler import TokenShards
    from tests.synthetic_tokens import write_token_dataset

    preset = "tiny" if tiny else "moshiko"
    kw = lm_kwargs_for(preset)
    tokens = write_token_dataset(tmp / "tokens", max(4 * batch, 8), frames=(frames, frames + 1),
                                 vocab=kw["text_card"], card=kw["card"])
    cfg = config_from_dict({"name": "gpu-check", "model": {"preset": preset},
                            "data": {"eval_split": None, "max_frames": frames, "min_frames": min(128, frames)},
                            "train": {"steps": steps, "batch_size": batch, "device": device,
                                      "threads": 1 if device == "cpu" else None,
                                      "precision": "bf16-mixed" if device.startswith("cuda") else "fp32"}})
    shards = TokenShards(sorted(tokens.glob("train-*.parquet")), cfg.data.speakers, kw["n_q"], kw["dep_q"], frames)
    t = time.perf_counter()
    trainer = Trainer(cfg, tmp / "train", shards)
    build = time.perf_counter() - t
    sync = torch.cuda.synchronize if trainer.device.type == "cuda" else (lambda: None)
    times, losses = [], []
    for _ in range(steps):
        sync()
        t = time.perf_counter()
        m = trainer.train_step()
        sync()
        times.append(time.perf_counter() - t)
        losses.append(m["loss"])
    timed = times[1:] or times  # the first step warms up kernels and the allocator
    n_params = sum(p.numel() for p in trainer.model.parameters())
    peak = torch.cuda.max_memory_allocated() / 2**30 if trainer.device.type == "cuda" else None
    out = {"preset": preset, "device": str(trainer.device), "params_m": n_params / 1e6, "batch": batch,
           "frames": frames, "build_s": build, "step_s": sum(timed) / len(timed), "step_s_runs": times,
           "losses": losses, "peak_gib": peak}
    print(f"trainer part: {preset} ({n_params / 1e6:,.1f} M parameters) on {trainer.device}, {trainer.precision}, "
          f"batch {batch} x {frames} frames: step time {out['step_s'] * 1000:,.0f} ms (steps "
          f"{', '.join(f'{x * 1000:.0f}' for x in times)} ms), loss {losses[0]:.3f} -> {losses[-1]:.3f}"
          + (f", peak {peak:.1f} GiB" if peak is not None else "") + f"; built in {build:.1f} s")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dialogues", type=int, default=100)
    ap.add_argument("--vllm-model", default=None, help="a local model folder for vLLM")
    ap.add_argument("--tiny", action="store_true", help="the tiny trainer config instead of Moshi 7B")
    ap.add_argument("--device", default=None, help="cuda (default on a GPU) or cpu")
    ap.add_argument("--train-steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--frames", type=int, default=125, help="frames per window (12.5 per second)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    device = args.device or ("cuda" if cuda() else "cpu")
    if device.startswith("cuda") and not cuda():
        print("trainer part: CUDA is not available; use --tiny --device cpu here", file=sys.stderr)
        return 2
    if device == "cpu" and not args.tiny:
        print("trainer part: the 7B model on the CPU is not a useful check; use --tiny", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kd-gpu-") as d:
        res = {"vllm": vllm_part(Path(d), args.dialogues, args.vllm_model),
               "trainer": trainer_part(Path(d), args.tiny, device, args.train_steps, args.batch, args.frames)}
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
