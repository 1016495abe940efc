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
                 json_out: Optional[Path] = typer.Option(None, "--json", help="Also write every figure here.")) -> None:
    """Measure every voice: median Whisper WER over the check sentences and its speaker identity by
    two independent speaker encoders (a d-vector model and Resemblyzer's GE2E); per encoder, the
    similarity matrix and the speaker groups; and how many distinct speakers the user pool holds
    (voices either encoder hears as one person, or variants of one engine voice, count once).
    Figures are cached by voice and engine version: a second check of the same voices computes nothing."""
    from kame_data.speech.voice_check import CHECK_SENTENCES, base_of, check_voices, pool_report

    sentences = min(sentences or CHECK_SENTENCES, CHECK_SENTENCES)
    assistant, users, skipped = _check_pools(recipe)
    voices = list(dict.fromkeys(assistant + users))
    measured: list = []
    missing: list[str] = []
    figures = check_voices(voices, lambda todo: _measure(measured.extend(todo) or todo, sentences, missing), sentences)
    report = pool_report(figures, [v.label for v in assistant], [v.label for v in users],
                         {v.label: base_of(v) for v in voices})
    _print_report(report, {v.label: v for v in voices})
    for label, why in skipped:
        typer.secho(f"  skipped {label}: {why}", fg=typer.colors.YELLOW)
    for why in missing:
        typer.secho(f"  speaker encoder missing, the count is one encoder's: {why}", fg=typer.colors.YELLOW)
    typer.echo(f"{len(voices)} voices: {len(measured)} measured now, {len(voices) - len(measured)} from the cache")
    if json_out:
        import json
        from datetime import date
        from importlib import metadata

        from kame_data.speech.screen import sound_of

        by_label = {v.label: v for v in voices}
        encoders = report.encoders
        json_out.write_text(json.dumps({
            "sentences": sentences, "assistant": report.assistant, "users": report.users,
            "speakers": report.groups.count, "groups": report.groups.groups,
            "encoders": {e: {"threshold": report.thresholds[e], "speakers": report.groups_by(e).count,
                             "groups": report.groups_by(e).groups,
                             "same_speaker": report.same_and_different(e)[0],
                             "different_speakers": report.same_and_different(e)[1]} for e in encoders},
            "measured": {"date": date.today().isoformat(), "command": "kame-data voices check "
                         + (recipe or "") + f" --sentences {sentences}", "kame_data": metadata.version("kame-data")},
            "voices": {k: {**f.to_json(), "sound": sound_of(by_label[k]),
                           "to_assistant": {e: report.to_assistant(k, e) for e in encoders},
                           "closest": {e: report.closest(k, e) for e in encoders}} for k, f in figures.items()}},
            indent=1), "utf-8")


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


def _measure(voices, sentences: int, missing: list[str]):
    from tqdm import tqdm

    from kame_data.speech.voice import open_engine
    from kame_data.speech.voice_check import load_encoders, measure_voice
    from kame_data.speech.whisper import WhisperAligner

    encoders, why = load_encoders(1)
    missing.extend(why)
    if not encoders:
        fail("no speaker encoder is installed: " + "; ".join(why))
    aligner = WhisperAligner(1)
    return [measure_voice(v.label, open_engine(v, 1), aligner, encoders, sentences)
            for v in tqdm(voices, desc="voices check", unit="voice")]


def _print_report(report, voices) -> None:
    from kame_data.speech.voice_check import WER_BOUND, default_pool

    encoders = report.encoders
    typer.echo(f"{'voice':<14} {'engine:voice':<20} {'WER':>6}" + "".join(f" {e + ' halves/assistant/closest':>30}"
                                                                        for e in encoders))
    for label, f in report.figures.items():
        v = voices[label]
        row = f"{label:<14} {v.engine + ':' + v.voice + (f'#{v.speaker}' if v.speaker else ''):<20} {f.median_wer:6.3f}"
        for e in encoders:
            near, sim = report.closest(label, e)
            to = "assistant" if label in report.assistant else f"{report.to_assistant(label, e):.3f}"
            row += f"   {f.halves[e]:.3f} {to:>9} {near[:10]:>10} {sim:.2f}"
        typer.echo(row)
    labels = list(report.figures)
    for e in encoders:
        same, different = report.same_and_different(e)
        groups = report.groups_by(e)
        typer.echo(f"\n{e}: similarity matrix (columns in the rows' order)")
        for i, a in enumerate(labels):
            typer.echo(f"  {i:>2} {a:<14}" + "".join(f" {report.sim(a, b, e):5.2f}" for b in labels))
        typer.echo(f"  same speaker (a voice's two halves): min {min(same):.3f}; different engine voices: "
                   + (f"max {max(different):.3f}, median {sorted(different)[len(different) // 2]:.3f}"
                      if different else "none"))
        typer.echo(f"  threshold {groups.threshold:.2f}: {groups.count} speakers in the user pool: "
                   + "; ".join(", ".join(g) for g in groups.groups))
        close = [k for k in report.users if report.to_assistant(k, e) >= groups.threshold]
        if close:
            typer.secho(f"  like the assistant: {', '.join(close)}", fg=typer.colors.YELLOW)
    variants = [k for k in report.users if report.of_assistant(k)]
    if variants:
        typer.secho(f"  variants of the assistant's voice (its speaker): {', '.join(variants)}", fg=typer.colors.YELLOW)
    groups = report.groups
    typer.echo(f"\nthe user pool holds {groups.count} distinct speakers (voices either encoder hears as one, or "
               f"variants of one engine voice, count once): " + "; ".join(", ".join(g) for g in groups.groups))
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
