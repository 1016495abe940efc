"""Embedded simulator speed per llama.cpp build: prompt and generation tokens/s on the same prompts.

Compares llama-cpp-python wheels built with different CMAKE_ARGS (the baseline: llama.cpp's
default native tuning; the candidate: the Makefile's portable flags), each installed into its own
folder and measured in a fresh interpreter, on SmolLM2-135M with the same oracle-style prompts.

    python benchmarks/llama_build.py                       # builds both wheels (minutes), then measures
    python benchmarks/llama_build.py --wheel native=W1.whl --wheel portable=W2.whl --reps 3

Wheels it builds are kept in benchmarks/.llama-wheels/<name>/ and reused on the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WHEELS = HERE / ".llama-wheels"

# Oracle-style requests: a system prompt, a partial transcript, an instruction (about 150-250 tokens).
_CONTEXTS = [
    "B: so I was reading about how plants make their food and I got confused\nB: what does chlorophyll "
    "actually do during photosynthesis",
    "B: a train leaves at two in the afternoon and travels at sixty miles per hour\nB: how far has it gone "
    "by half past four",
    "B: which organelle makes most of a cell's energy\nA: good question\nB: my choices are the nucleus, the "
    "ribosome, the mitochondrion or the golgi apparatus",
    "B: I need help with a word problem\nB: Tom has three boxes with twelve apples each and gives away "
    "seven apples, how many are left",
]
_SYSTEM = ("You simulate the assistant in a spoken conversation. Given the conversation so far, write the "
           "assistant's next reply as it would be spoken: one or two short sentences, no lists, no markup.")


def _flags(name: str) -> str:
    if name == "native":
        return "-DLLAVA_BUILD=OFF"  # llama.cpp's default: GGML_NATIVE=ON, tuned for this host's CPU
    text = (ROOT / "Makefile").read_text("utf-8")
    m = re.search(r"^LLAMA_CMAKE_ARGS \?=((?:.*\\\n)*.*)$", text, re.M)
    if not m:
        raise SystemExit("LLAMA_CMAKE_ARGS not found in the Makefile")
    return " ".join(m.group(1).replace("\\\n", " ").split())


def build(name: str, version: str) -> Path:
    out = WHEELS / name
    found = sorted(out.glob("llama_cpp_python-*.whl"))
    if found:
        return found[-1]
    print(f"building {name} wheel (CMAKE_ARGS={_flags(name)!r}); this takes minutes", flush=True)
    env = {**os.environ, "CMAKE_ARGS": _flags(name)}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-cache-dir", "--no-deps", "--no-binary",
                    "llama-cpp-python", "-w", str(out), f"llama-cpp-python=={version}"], env=env, check=True)
    return sorted(out.glob("llama_cpp_python-*.whl"))[-1]


def measure_here(model: str, threads: int, reps: int, max_tokens: int) -> dict:
    """Runs in the child interpreter, against the wheel on its PYTHONPATH."""
    from llama_cpp import Llama
    from llama_cpp import llama_cpp as C

    llm = Llama(model_path=model, n_ctx=2048, n_threads=threads, verbose=False, seed=0)
    prompt_tps, gen_tps = [], []
    for _ in range(reps):
        n_p = t_p = n_g = t_g = 0.0
        for ctx in _CONTEXTS:
            llm.reset()  # no prefix reuse: every prompt token is evaluated
            C.llama_perf_context_reset(llm._ctx.ctx)
            llm.create_chat_completion(messages=[{"role": "system", "content": _SYSTEM},
                                                 {"role": "user", "content": ctx}],
                                       max_tokens=max_tokens, temperature=0.0, seed=0)
            perf = C.llama_perf_context(llm._ctx.ctx)
            n_p, t_p = n_p + perf.n_p_eval, t_p + perf.t_p_eval_ms
            n_g, t_g = n_g + perf.n_eval, t_g + perf.t_eval_ms
        prompt_tps.append(1000 * n_p / t_p)
        gen_tps.append(1000 * n_g / t_g)
    info = C.llama_print_system_info().decode()
    return {"prompt_tps": statistics.median(prompt_tps), "gen_tps": statistics.median(gen_tps),
            "cpu": " ".join(f for f in ("AVX2", "AVX512", "AVX512_VNNI", "AMX_INT8") if f"{f} = 1" in info)}


def measure(wheel: Path, model: str, threads: int, reps: int, max_tokens: int) -> dict:
    with tempfile.TemporaryDirectory() as site:
        subprocess.run([sys.executable, "-m", "pip", "install", "-qq", "--no-deps", "--target", site, str(wheel)],
                       check=True)
        env = {**os.environ, "PYTHONPATH": site + os.pathsep + os.environ.get("PYTHONPATH", "")}
        code = (f"import json, sys; sys.path.insert(0, {str(HERE)!r}); from llama_build import measure_here; "
                f"print(json.dumps(measure_here({model!r}, {threads}, {reps}, {max_tokens})))")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": f"exit {r.returncode}: {(r.stderr.strip().splitlines() or ['?'])[-1]}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", action="append", default=[], metavar="NAME=PATH",
                    help="a prebuilt wheel to measure (default: build 'native' and 'portable')")
    ap.add_argument("--version", default="0.3.36", help="llama-cpp-python version to build")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kame_data.llm.llamacpp import embedded_model_path

    model = str(embedded_model_path())
    wheels = dict(w.split("=", 1) for w in args.wheel) or {n: str(build(n, args.version)) for n in ("native", "portable")}
    print(f"model {Path(model).name}, {args.threads} threads, {len(_CONTEXTS)} prompts x {args.reps} reps")
    print(f"{'build':<10} {'prompt tok/s':>13} {'gen tok/s':>10}  cpu paths")
    base = None
    for name, wheel in wheels.items():
        r = measure(Path(wheel), model, args.threads, args.reps, args.max_tokens)
        if "error" in r:
            print(f"{name:<10} {r['error']}")
            continue
        rel = "" if base is None else (f"   ({r['prompt_tps'] / base['prompt_tps']:.2f}x prompt, "
                                       f"{r['gen_tps'] / base['gen_tps']:.2f}x gen vs {list(wheels)[0]})")
        base = base or r
        print(f"{name:<10} {r['prompt_tps']:>13.0f} {r['gen_tps']:>10.1f}  {r['cpu']}{rel}")


if __name__ == "__main__":
    main()
