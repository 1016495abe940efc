"""The commands over a trained model: export it for the tools KAME's models load in, run it on a dialogue."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from kame_data.cli.common import console_logging, fail

CHECKPOINT_HELP = ("A `kame-data train` OUT folder (its model.safetensors, else its latest checkpoint), an exported "
                   "folder, a model.safetensors beside its moshi_lm_kwargs.json, or a checkpoints/step-N.pt.")


def _train_module():
    """kame_data.train with its dependencies, or one line naming the install command."""
    try:
        import kame_data.train as kt

        kt.require()
        return kt
    except ImportError as e:
        fail(str(e) if "kame-data[train]" in str(e) else
             f"this command needs the train extra ({e}); install it with: pip install 'kame-data[train]' "
             "&& pip install --no-deps moshi==0.2.13", 1)


class Layout(str, Enum):
    kame = "kame"
    moshi = "moshi"
    kame_finetune = "kame-finetune"


def export_checkpoint_cmd(
    checkpoint: Path = typer.Argument(..., help=CHECKPOINT_HELP),
    to: Layout = typer.Option(..., "--to", help="kame (KAME's loader), moshi (kyutai's moshi loader: no oracle "
                                                 "stream) or kame-finetune (MoshiForFinetuning.from_pretrained)."),
    dest: Path = typer.Argument(..., help="Folder to write the export into."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Cast the weights: float32 or bfloat16 (default: "
                                                               "as trained)."),
) -> None:
    """Write trained weights in the layout another tool loads.

    kame: model.safetensors (LMModel keys + oracle_emb) and moshi_lm_kwargs.json, as `kame-data
    train` writes them (SakanaAI/kame's get_moshi_lm loads them strictly).
    moshi: model.safetensors without oracle_emb (dropped: a plain LMModel has no oracle stream) and
    config.json as in a Kyutai model repository, for moshi's get_moshi_lm / CheckpointInfo.
    kame-finetune: the kame pair with the gating weights named as MoshiForFinetuning exposes them,
    for its from_pretrained (to fine-tune further with kame_finetune).
    The tokenizer (and the tiny codec, which no hub holds) go along when known.

    Example:  kame-data export-checkpoint out/train/train_tiny --to moshi out/tiny-moshi
    """
    kt = _train_module()
    import torch

    from kame_data.train.weights import export_checkpoint

    dtypes = {None: None, "float32": torch.float32, "bfloat16": torch.bfloat16}
    if dtype not in dtypes:
        fail(f"--dtype: expected float32 or bfloat16, got {dtype!r}")
    console_logging()
    try:
        result = export_checkpoint(checkpoint, to.value, dest, dtypes[dtype])
    except (kt.TrainError, OSError) as e:
        fail(str(e), 1)
    typer.secho(f"exported {checkpoint} as {to.value} to {dest.resolve()}", fg=typer.colors.GREEN)
    for f in result.files:
        typer.echo(f"  {f.name}")
    if result.dropped:
        typer.echo(f"  dropped {', '.join(result.dropped)}: moshi's LMModel has no oracle stream")


def infer_cmd(
    checkpoint: Path = typer.Argument(..., help=CHECKPOINT_HELP),
    dataset: Path = typer.Option(..., "--dataset", "-d", help="A dataset folder written by `kame-data run`."),
    row_id: str = typer.Option(..., "--id", help="The dialogue to answer (a row id)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for reply.wav, dialogue.wav, reply.txt, infer.json."),
    oracle: str = typer.Option("row", "--oracle", help="row (the row's ladder), none (blank stream) or openai "
                                                       "(a live OpenAI-compatible simulator)."),
    delay: float = typer.Option(0.0, "--delay", min=0.0, help="Seconds each oracle event arrives late (a constant; "
                                "--latency models a back-end instead)."),
    latency: Optional[str] = typer.Option(None, "--latency", help="Time the oracle as a KAME server would deliver "
                                          "it under an oracle.latency preset (ideal, hosted-fast, hosted-slow, "
                                          "stress) or a JSON mapping of its parameters: each reply from its first "
                                          "chunk, late tokens lost."),
    model: Optional[str] = typer.Option(None, "--model", help="--oracle openai: the model name."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="--oracle openai: the server's URL."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="--oracle openai: the environment "
                                                                            "variable holding the API key."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    temperature: float = typer.Option(0.8, "--temperature", min=0.0, help="Audio sampling temperature."),
    text_temperature: float = typer.Option(0.7, "--text-temperature", min=0.0, help="Text sampling temperature "
                                                                                     "(both 0: greedy)."),
    max_seconds: Optional[float] = typer.Option(None, "--max-seconds", min=0.1, help="Only this much of the "
                                                                                     "dialogue."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or cuda:N."),
    codec: Optional[str] = typer.Option(None, "--codec", help="The Mimi the model was trained with (default: "
                                                              "recorded beside the checkpoint)."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="Its SentencePiece model (default: the "
                                                                       "checkpoint's tokenizer.model)."),
) -> None:
    """Run a trained tandem model over one dialogue's user channel and write its reply.

    The model hears the user (channel B) frame by frame and generates the assistant's text and
    audio; the oracle stream is fed as in training: the row's ladder, nothing (none), or a live
    simulator asked at each ladder step (openai), every event --delay seconds late, or timed by a
    back-end latency model (--latency hosted-fast: each reply from its first chunk, one token per
    frame, late tokens lost; docs/concepts/oracle-arrival.md). Mimi decodes the audio. OUT gets
    reply.wav, dialogue.wav (reply left, user right), reply.txt, infer.json (events with their arrival).

    Example:  kame-data infer out/train/train_tiny --dataset out/quickstart --id gsm8k-1234-v0 --out out/reply
    """
    kt = _train_module()
    from kame_data.llm.config import BackendConfig
    from kame_data.train.infer import InferConfig, infer

    backend = None
    if oracle == "openai":
        if not model:
            fail("--oracle openai needs --model (and --base-url for a server other than OpenAI's)")
        backend = BackendConfig(kind="openai", model=model, base_url=base_url, api_key_env=api_key_env)
    cfg = InferConfig(oracle=oracle, delay=delay, latency=_latency_arg(latency), seed=seed, temperature=temperature,
                      text_temperature=text_temperature, device=device, max_seconds=max_seconds, codec=codec,
                      tokenizer=str(tokenizer) if tokenizer else None, backend=backend)
    console_logging()
    try:
        result = infer(checkpoint, dataset, row_id, out, cfg)
    except (kt.TrainError, OSError) as e:
        fail(str(e), 1)
    typer.secho(f"reply: {(result.out / 'reply.wav').resolve()}", fg=typer.colors.GREEN, bold=True)
    typer.echo(f"  {result.frames} frames, {result.events} oracle events fed, {result.seconds:.1f} s")
    typer.echo(f"  text: {result.text[:200]}")


def register(app: typer.Typer) -> None:
    app.command("export-checkpoint")(export_checkpoint_cmd)
    app.command("infer")(infer_cmd)


def _latency_arg(value: Optional[str]):
    """--latency: a preset name, or a JSON mapping of oracle.latency parameters."""
    if value is None or not value.lstrip().startswith("{"):
        return value
    import json

    try:
        return json.loads(value)
    except ValueError as e:
        fail(f"--latency: not a preset name or a JSON mapping ({e})")
