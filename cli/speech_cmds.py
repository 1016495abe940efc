"""Voice and turn-taking commands: the voice catalogue (list, add, check) and fitting gap histograms."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kame_data.cli.common import fail

voices_app = typer.Typer(help="The voice catalogue: bundled voices and variants, voices you added, screening.",
                         no_args_is_help=True)


@voices_app.command("list")
def voices_list() -> None:
    """Catalogue voices and pools (usable by name in a recipe), and the piper voices in the voice cache."""
    from kame_data.speech.piper_engine import cached_piper_voices, voice_folder
    from kame_data.speech.voice import VARIANT_KNOBS
    from kame_data.speech.voices import BUNDLED, POOLS

    typer.echo("catalogue voices (speak.assistant / speak.user: NAME):")
    for name, v in BUNDLED.items():
        knobs = ", ".join(f"{k} {getattr(v, k):g}" for k in VARIANT_KNOBS if getattr(v, k) != getattr(v.base, k))
        typer.echo(f"  {name:<12} {v.engine}:{v.voice:<8} {v.sex or '-':<7} {v.accent or '-':<4} {knobs}")
    typer.echo("pools:")
    for name, members in POOLS.items():
        typer.echo(f"  {name:<14} {', '.join(members)}")
    cached = cached_piper_voices()
    typer.echo(f"piper voices in {voice_folder()}: {', '.join(cached) or 'none (kame-data voices add)'}")


@voices_app.command("add")
def voices_add(model: Path = typer.Argument(..., help="A piper voice .onnx (its .onnx.json beside it)."),
               name: Optional[str] = typer.Option(None, "--name", help="The name recipes use (default: file stem).")) -> None:
    """Copy a downloaded piper voice into the voice cache, so recipes can name it:
    `{engine: piper, voice: NAME}`. Nothing is downloaded; get voices from piper's own downloader."""
    from kame_data.speech.piper_engine import add_piper_voice

    try:
        dest = add_piper_voice(model, name)
    except (RuntimeError, ValueError, OSError) as e:
        fail(str(e))
    typer.secho(f"added {dest.stem}: use {{engine: piper, voice: {dest.stem}}}", fg=typer.colors.GREEN)


@voices_app.command("check")
def voices_check(recipe: str = typer.Argument("quickstart", help="Recipe whose voice pools to screen."),
                 sentences: int = typer.Option(4, "--sentences", min=1, max=8)) -> None:
    """Median Whisper WER of every voice of a recipe's pools over the screening sentences."""
    from dataclasses import replace

    from kame_data.recipe import load_recipe
    from kame_data.runner.config import RunConfig
    from kame_data.speech.screen import voice_wer
    from kame_data.speech.stage import SpeakStage

    cfg = RunConfig.resolve(load_recipe(recipe)).speak
    renderer = SpeakStage(replace(cfg, workers=1)).renderer
    renderer.load(threads=1)
    if renderer.aligner is None:
        from kame_data.speech.whisper import WhisperAligner

        renderer.aligner = WhisperAligner(1)
    for v in cfg.voices:
        wer = voice_wer(renderer.engines[v], renderer.aligner, sentences, cfg.sample_rate, cfg.target_dbfs)
        typer.echo(f"  {v.label:<16} median WER {wer:.3f}" + ("  (left out at max_wer "
                                                             f"{cfg.screen.max_wer})" if wer > cfg.screen.max_wer else ""))


def fit_gaps_cmd(path: Path = typer.Argument(..., help="A dataset folder, a kame-finetune export, or word-list JSON."),
                 width: float = typer.Option(0.1, "--width", help="Bin width in seconds.")) -> None:
    """Fit turn-gap histograms from a word-aligned corpus and print them as recipe YAML
    (`speak.gap` for every speaker change, `speak.reply.gap` for the assistant's replies)."""
    import yaml

    from kame_data.dataset.fit_gaps import corpus_gaps, fit_histogram
    from kame_data.speech.stage import SpeakStage

    try:
        gaps = corpus_gaps(path)
    except (OSError, ValueError) as e:
        fail(str(e))
    out: dict = {}
    for key, where in (("other", "gap"), ("reply", "reply")):
        if gaps[key]:
            g = fit_histogram(gaps[key], width)
            spec = {"distribution": "histogram", "edges": list(g.edges), "weights": list(g.weights)}
            if where == "gap":
                out["gap"] = spec
            else:
                out["reply"] = {"gap": spec}
    if not out:
        fail(f"no speaker changes found under {path}")
    typer.echo(f"# {len(gaps['reply'])} assistant replies, {len(gaps['other'])} other speaker changes in {path}")
    typer.echo(yaml.safe_dump({SpeakStage.name: out}, sort_keys=False, default_flow_style=None).rstrip())


def register(app: typer.Typer) -> None:
    app.add_typer(voices_app, name="voices")
    app.command("fit-gaps")(fit_gaps_cmd)
