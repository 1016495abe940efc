"""How fast `kame-data infer` answers a dialogue, through the command a user runs.

Without arguments: writes a 3-dialogue voiced synthetic dataset (tests/synthetic.py), trains the
tiny model on it for 4 steps with `kame-data train train_tiny`, then runs `kame-data infer` on its
first dialogue with the row's oracle and with a blank one, and prints per run the command's wall
time, the generation time (infer.json `generate_seconds`) and the real-time factor (seconds of
dialogue per second of generation; 1.0 is the baseline a live conversation needs). It exits 1 when
the tiny model's command takes more than --bound seconds (the issue's "runs in seconds" on a CPU).

With --checkpoint, --dataset and --id it times that model instead (e.g. a 7B export on a GPU with
--device cuda).

    python benchmarks/infer_speed.py [--bound 60] [--threads 1]
    python benchmarks/infer_speed.py --checkpoint OUT/train --dataset OUT/data_run --id ID --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CLI = [sys.executable, "-m", "kame_data.cli.main"]


def run(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint")
    ap.add_argument("--dataset")
    ap.add_argument("--id")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the commands (CPU)")
    ap.add_argument("--bound", type=float, default=60.0, help="seconds the tiny model's infer command may take")
    a = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tiny = a.checkpoint is None
        if tiny:
            from tests.synthetic import spoken_dataset

            dataset, ckpt, row = spoken_dataset(tmp / "dataset", 3), tmp / "train", "synthetic-0-v0"
            t = run(CLI + ["train", "train_tiny", "--dataset", str(dataset), "--out", str(ckpt), "--max-steps", "4",
                           "--quiet"], env)
            print(f"kame-data train train_tiny (4 steps, 3 dialogues): {t:.1f} s")
        else:
            dataset, ckpt, row = Path(a.dataset), Path(a.checkpoint), a.id
        worst = 0.0
        for oracle in ("row", "none"):
            out = tmp / f"infer-{oracle}"
            wall = run(CLI + ["infer", str(ckpt), "--dataset", str(dataset), "--id", row, "--out", str(out),
                              "--oracle", oracle, "--device", a.device], env)
            info = json.loads((out / "infer.json").read_text())
            audio_s = info["frames"] / info["frame_rate"]
            gen = info["generate_seconds"]
            print(f"infer --oracle {oracle:4s}: command {wall:.1f} s, generation {gen:.2f} s for {audio_s:.1f} s of "
                  f"dialogue ({info['frames']} frames, {1000 * gen / info['frames']:.1f} ms/frame), "
                  f"real-time factor {audio_s / gen:.2f} (baseline 1.0)")
            worst = max(worst, wall)
    print(f"load average: {os.getloadavg()[0]:.2f}")
    if tiny and worst > a.bound:
        print(f"FAIL: the tiny model's infer took {worst:.1f} s > bound {a.bound:.0f} s")
        sys.exit(1)


if __name__ == "__main__":
    main()
