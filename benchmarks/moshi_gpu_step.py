"""Time one training step (forward + backward, no optimizer) of the full-size Moshi LM with the
oracle embedding, in bf16 on CUDA, for batch 1 at T = 125 and 375 frames (10 s and 30 s).

The model is moshi's own 7B config (`moshi.models.loaders._lm_kwargs`) with random weights: the
numbers measure the architecture, not a checkpoint. Each length runs once to warm up, then is timed
over --runs runs with torch.cuda.synchronize around each; peak memory is CUDA's max allocated.

Needs only torch, numpy and moshi's model code (einops, safetensors, sentencepiece, huggingface_hub):
not kame-data's other dependencies, nor sphn / sounddevice / bitsandbytes, so moshi can be installed
with `pip install --no-deps --target /tmp/site moshi-0.2.13-py3-none-any.whl` and PYTHONPATH=/tmp/site.

    python benchmarks/moshi_gpu_step.py                      # GPU, full size
    python benchmarks/moshi_gpu_step.py --tiny --device cpu  # CPU smoke check with the tiny config
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # kame_data from a checkout, uninstalled

import torch  # noqa: E402

from kame_data.train.losses import lm_losses  # noqa: E402
from kame_data.train.model import build_model, compile_context  # noqa: E402


def random_batch(model, batch: int, frames: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    lm = model.lm
    g = torch.Generator(device="cpu").manual_seed(frames)
    codes = torch.randint(0, lm.card, (batch, lm.num_codebooks, frames), generator=g)
    codes[:, 0] = torch.randint(0, lm.text_card, (batch, frames), generator=g)
    oracle = torch.randint(0, lm.text_card + 1, (batch, frames), generator=g)
    return codes.to(device), oracle.to(device)


def step(model, codes, oracle) -> float:
    out = model(codes, oracle)
    losses = lm_losses(out, codes, model.lm.dep_q)
    loss = losses["text"] + losses["audio"]
    loss.backward()
    return float(loss.detach())


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny CPU config instead of Moshi 7B")
    ap.add_argument("--device", default=None, help="cuda (default) or cpu (default with --tiny)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[125, 375], help="frames per sequence (12.5 per second)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="let moshi torch.compile its kernels (default: eager)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()

    device = torch.device(args.device or ("cpu" if args.tiny else "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("CUDA is not available; use --tiny --device cpu for a smoke check", file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = build_model("tiny" if args.tiny else "moshiko", None, device=device, dtype=dtype)
    model.train()
    sync(device)
    build_s = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}, "
          f"{'tiny' if args.tiny else 'moshiko 7B'} config, {n_params / 1e6:,.1f} M parameters in {dtype}, built in {build_s:.1f} s")
    results = []
    with compile_context(args.compile):
        for frames in args.lengths:
            codes, oracle = random_batch(model, args.batch, frames, device)
            model.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            step(model, codes, oracle)  # warm-up
            model.zero_grad(set_to_none=True)
            times = []
            for _ in range(args.runs):
                sync(device)
                t = time.perf_counter()
                loss = step(model, codes, oracle)
                sync(device)
                times.append((time.perf_counter() - t) * 1000)
                model.zero_grad(set_to_none=True)
            peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
            r = {"batch": args.batch, "frames": frames, "seconds_of_audio": frames / 12.5,
                 "ms_mean": statistics.mean(times), "ms_min": min(times), "ms_runs": [round(x, 2) for x in times],
                 "peak_gib": peak, "loss": loss}
            results.append(r)
            print(f"B={args.batch} T={frames:4d} ({frames / 12.5:4.1f} s): fwd+bwd {r['ms_mean']:8.1f} ms mean "
                  f"(min {r['ms_min']:.1f}; runs {', '.join(f'{x:.1f}' for x in times)}), peak {peak:.2f} GiB, loss {loss:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "device": str(device), "tiny": args.tiny,
                                         "params": n_params, "dtype": str(dtype), "build_s": build_s,
                                         "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
