"""The `kame-data` command line. Thin: parses, loads a recipe, calls the library, shows progress."""

from __future__ import annotations

import logging
import time
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(
    name="kame-data",
    help=(
        "Build training data for KAME-style tandem speech-to-speech models.\n\n"
        "A recipe (YAML) names the sources and each stage's config. `kame-data run` pulls the items, "
        "writes spoken-style dialogues, renders them to 24 kHz stereo speech with word timings, "
        "simulates oracle ladders with an LLM and publishes sharded Parquet with a dataset card.\n\n"
        "Start with:  kame-data run quickstart --out out/quickstart"
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _fail(message: str, code: int = 2) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def _console_logging() -> None:
    """Warnings and errors on the console; the full INFO log goes to OUT/run.log (the runner's)."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)


def _tqdm_factory(quiet: bool):
    from tqdm import tqdm

    positions: dict[str, int] = {}

    def make(name: str, total: int):
        positions.setdefault(name, len(positions))
        return tqdm(total=total, desc=f"{name:>7}", unit="item", position=positions[name], leave=True,
                    disable=quiet, dynamic_ncols=True)

    return make


@app.command()
def run(
    recipe: str = typer.Argument(..., help="Recipe YAML path, or a bundled recipe name such as 'quickstart'."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder (default: out/<recipe name>)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, help="Take at most N source items in all (interleaved across sources)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the shared LLM request cache."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    executor: str = typer.Option("local", "--executor", help="local (this machine) or ray (Ray Data; local "
                                 "cluster, or --ray-address)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Address of an existing Ray cluster."),
    no_resume: bool = typer.Option(False, "--no-resume", help="Ignore the per-item checkpoints of an earlier run "
                                   "in OUT and recompute everything."),
) -> None:
    """Run a recipe end to end: sources -> script -> speak -> oracle -> publish.

    Writes OUT/data/*.parquet (audio as a Hugging Face Audio feature), OUT/README.md (dataset
    card), OUT/manifest.json, OUT/rejects.jsonl (every dropped item with a reason code) and
    OUT/run.log. Each stage's result per item is checkpointed in OUT/.checkpoints: after a crash
    or kill, the same command resumes; after a config change only the changed stage and the
    later ones are recomputed.

    Example:  kame-data run recipes/quickstart.yaml --out out/quickstart --limit 2
    """
    from kame_data.recipe import RecipeError, load_recipe
    from kame_data.runner import RunError, run_recipe
    from kame_data.sources.rows import SourceError

    try:
        r = load_recipe(recipe)
    except RecipeError as e:
        _fail(str(e))
    out_dir = out or Path("out") / r.name
    _console_logging()
    t0 = time.perf_counter()
    try:
        result = run_recipe(r, out_dir, limit=limit, progress=_tqdm_factory(quiet), use_cache=not no_cache,
                            executor=executor, ray_address=ray_address, resume=not no_resume)
    except (RunError, SourceError, RecipeError) as e:
        _fail(str(e), 1)
    m = result.manifest
    typer.echo("")
    typer.secho(f"dataset: {out_dir.resolve()}", fg=typer.colors.GREEN, bold=True)
    typer.echo(f"  {m['counts']['samples']} dialogues, {len(m['shards'])} shards, "
               f"{m['audio_hours'] * 60:.1f} min of audio, {m['oracle_events']} oracle events "
               f"in {time.perf_counter() - t0:.0f} s")
    typer.echo(f"  card:    {(out_dir / 'README.md').resolve()}")
    typer.echo(f"  rejects: {(out_dir / 'rejects.jsonl').resolve()} ({sum(m['rejects'].values())})")
    typer.echo(f"  load:    datasets.load_dataset('parquet', data_dir='{(out_dir / 'data').resolve()}')")


@app.command()
def status(out: Path = typer.Argument(..., help="An output folder of `kame-data run` (finished or not).")) -> None:
    """How far a run got, per stage: inputs seen, outputs, items computed (vs. read from checkpoints)."""
    from kame_data.runner.status import read_status

    try:
        st = read_status(out)
    except FileNotFoundError as e:
        _fail(str(e), 1)
    typer.echo(f"{out}: {st['recipe']} [{st['state']}] ({st['executor']} executor), {st['items']} items")
    for name, s in st["stages"].items():
        typer.echo(f"  {name:>7}: {s['inputs']:>6} in  {s['outputs']:>6} out  {s['computed']:>6} computed  "
                   f"{s.get('checkpoints', 0):>6} checkpoints")
    typer.echo(f"  samples: {st['samples']}  rejects: {st['rejects']}")
    if st.get("error"):
        typer.echo(f"  error: {st['error']}")


@app.command("validate")
def validate_cmd(out: Path = typer.Argument(..., help="An output folder written by `kame-data run`.")) -> None:
    """Check a dataset: schemas, word order and bounds, oracle events, audio format, shard counts.

    Exits 1 at the first violation and names its shard, row id and field.
    """
    from kame_data.dataset.validate import DatasetInvalid, validate_dataset

    try:
        report = validate_dataset(out)
    except DatasetInvalid as e:
        _fail(f"invalid dataset {out}: {e}", 1)
    typer.secho(f"ok: {out} ({report.rows} rows in {report.shards} shards, {report.events} oracle events)",
                fg=typer.colors.GREEN)



class ExportTarget(str, Enum):
    kame_finetune = "kame-finetune"
    moshi_finetune = "moshi-finetune"


@app.command("export")
def export_cmd(
    target: ExportTarget = typer.Argument(..., help="kame-finetune (audio/, text/, oracle_raw/) or moshi-finetune "
                                                    "(stereo WAVs + word alignments + JSONL index)."),
    out: Path = typer.Argument(..., help="An output folder written by `kame-data run`."),
    dest: Path = typer.Argument(..., help="Folder to write the export into."),
    split: Optional[str] = typer.Option(None, "--split", "-s", help="Export only this split (default: every split)."),
    absolute: bool = typer.Option(False, "--absolute-paths", help="moshi-finetune: absolute WAV paths in the index."),
) -> None:
    """Write a dataset in the layout a trainer reads as is.

    kame-finetune: DEST/audio/<id>.wav, DEST/text/<id>.json, DEST/oracle_raw/<id>.json (with several
    splits and no --split, one such folder per split under DEST/<split>/).
    moshi-finetune: DEST/data_stereo/<id>.wav + <id>.json alignments, DEST/<split>.jsonl.
    Ids that are not plain file names are cleaned; DEST/id_map.json maps them back.

    Example:  kame-data export kame-finetune out/quickstart out/quickstart-kame
    """
    from kame_data.dataset.export import (
        ExportError,
        export_kame_finetune,
        export_moshi_finetune,
    )

    _console_logging()
    try:
        if target is ExportTarget.kame_finetune:
            report = export_kame_finetune(out, dest, split=split)
        else:
            report = export_moshi_finetune(out, dest, split=split, absolute_paths=absolute)
    except ExportError as e:
        _fail(str(e), 1)
    typer.secho(f"exported {report.rows} dialogues ({target.value}) to {dest.resolve()}", fg=typer.colors.GREEN)
    if report.renamed:
        typer.echo(f"  {len(report.renamed)} ids were not plain file names; see id_map.json")


@app.command("push")
def push_cmd(
    out: Path = typer.Argument(..., help="An output folder written by `kame-data run`."),
    repo: str = typer.Option(..., "--repo", "-r", help="Hub dataset repo, NAMESPACE/NAME (created if missing)."),
    private: bool = typer.Option(False, "--private", help="Create the repo as private."),
    revision: Optional[str] = typer.Option(None, "--revision", help="Branch to push to (default: main)."),
    no_validate: bool = typer.Option(False, "--no-validate", help="Skip `validate` before uploading."),
) -> None:
    """Validate a dataset and upload it to the Hugging Face hub (card, manifest, shards, plots).

    The token is read from the HF_TOKEN environment variable and never printed.
    HF_ENDPOINT selects another hub; HF_HUB_OFFLINE=1 makes the push fail at once.
    """
    from kame_data.dataset.push import PushError, push_dataset

    _console_logging()
    try:
        url = push_dataset(out, repo, private=private or None, revision=revision, validate=not no_validate)
    except PushError as e:
        _fail(f"push failed: {e}", 1)
    typer.secho(f"pushed {out} to {url}", fg=typer.colors.GREEN)


@app.command("inspect")
def inspect_cmd(
    out: Path = typer.Argument(..., help="An output folder written by `kame-data run`."),
    id: Optional[str] = typer.Option(None, "--id", help="Show the dialogue with this row id."),
    random_n: Optional[int] = typer.Option(None, "--random", min=1, help="Show N dialogues picked at random."),
    source: Optional[str] = typer.Option(None, "--source", help="Only dialogues from this source (e.g. gsm8k)."),
    level: Optional[int] = typer.Option(None, "--level", min=0, max=5, help="Only oracle events at this hint level (0-5)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for --random, to show the same dialogues again."),
) -> None:
    """Show a dialogue in the terminal: turns with times and voices, then its oracle ladder.

    The ladder lists each event's time, hint level, spoken ratio, prediction, the hint where one
    was shown, and the token-F1 of the prediction to the true reply. Without --id or --random,
    the first dialogue (after --source / --level filters) is shown.

    Example:  kame-data inspect out/quickstart --random 2 --level 0
    """
    from rich.console import Console
    from rich.rule import Rule

    from kame_data.review.data import ReviewError, open_dataset
    from kame_data.review.inspect import render_dialogue, select_rows

    if id is not None and random_n is not None:
        _fail("give --id or --random, not both")
    try:
        rows = select_rows(open_dataset(out), id=id, random_n=random_n, source=source, level=level, seed=seed)
    except ReviewError as e:
        _fail(str(e), 1)
    console = Console(highlight=False)
    for i, row in enumerate(rows):
        if i:
            console.print(Rule())
        console.print(render_dialogue(row, level=level))


@app.command("review")
def review_cmd(
    out: Path = typer.Argument(..., help="An output folder written by `kame-data run`."),
    output: Path = typer.Option(Path("review.html"), "--output", "-o", help="The HTML file to write."),
    sample: Optional[int] = typer.Option(None, "--sample", min=1, help="Cards for N dialogues picked at random (the summary still covers all)."),
    seed: int = typer.Option(0, "--seed", help="Seed for --sample."),
    audio: str = typer.Option("auto", "--audio", help="auto | wav | opus | none. auto embeds the WAV while the page stays small, else Opus."),
) -> None:
    """Write one self-contained HTML page to review oracle ladders (works offline).

    A summary (similarity per level, level and duration histograms, rejects, sources), then one
    card per dialogue: audio, a timeline of both speakers' words with the oracle events as
    markers, and the ladder. Flag dialogues on the page and save the flags as JSON; then
    `kame-data publish OUT --exclude FLAGS` leaves them out.

    Example:  kame-data review out/quickstart -o review.html --sample 50
    """
    from kame_data.review.data import ReviewError
    from kame_data.review.html import write_review

    _console_logging()
    try:
        page = write_review(out, output, sample=sample, seed=seed, audio=audio)
    except ReviewError as e:
        _fail(str(e), 1)
    typer.secho(f"review page: {page.path.resolve()}", fg=typer.colors.GREEN)
    typer.echo(f"  {page.cards} of {page.dialogues} dialogues, audio: {page.audio}, {page.size / 1e6:.1f} MB")


@app.command("publish")
def publish_cmd(
    out: Path = typer.Argument(..., help="An output folder written by `kame-data run`."),
    exclude: Path = typer.Option(..., "--exclude", help="Flags JSON saved from the review page (or a JSON list of row ids)."),
    to: Optional[Path] = typer.Option(None, "--to", help="Write the result here (a new folder) instead of rewriting OUT in place."),
) -> None:
    """Rewrite the dataset without the rows flagged in review.

    Shards are rewritten under temporary names and then renamed; manifest.json (shard rows and
    sha256, counts), the card and rejects.jsonl (reason flagged_in_review) follow, so that
    `kame-data validate` still passes.

    Example:  kame-data publish out/quickstart --exclude flags-quickstart.json --to out/quickstart-reviewed
    """
    from kame_data.review.data import ReviewError
    from kame_data.review.flags import FlagsError, load_flag_notes
    from kame_data.review.publish import publish_excluding

    _console_logging()
    try:
        result = publish_excluding(out, load_flag_notes(exclude), dest=to)
    except (FlagsError, ReviewError) as e:
        _fail(str(e), 1)
    typer.secho(f"published: {result.dest.resolve()} ({result.kept} rows kept, {len(result.excluded)} excluded)",
                fg=typer.colors.GREEN)
    if result.unknown:
        typer.secho(f"  {len(result.unknown)} flagged id(s) not in the dataset: {', '.join(result.unknown[:5])}"
                    + (" …" if len(result.unknown) > 5 else ""), fg=typer.colors.YELLOW)


@app.command("doctor")
def doctor_cmd(
    recipe: Optional[str] = typer.Option(None, "--recipe", "-r", help="Check the voices and simulator model this "
                                         "recipe uses (default: the bundled engines' default voices and model)."),
    only: Optional[list[str]] = typer.Option(None, "--only", help="Run only this check (repeatable): piper, hibari, "
                                             "espeak-ng, whisper, llama.cpp, parquet, moshi."),
) -> None:
    """Check that every engine really works on this machine, each in its own subprocess.

    piper and hibari render a sentence, espeak-ng speaks, Whisper hears it back, llama.cpp
    generates tokens, a Parquet row round-trips through `datasets`, and (if installed) torch +
    moshi build a tiny model. A native crash is caught and named. Prints a table, then what to
    do about each failure; exits 1 when a required engine fails.

    Example:  kame-data doctor --recipe recipes/quickstart.yaml
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from kame_data.doctor import CHECKS, diagnose, recipe_options

    names = [c.name for c in CHECKS]
    unknown = [n for n in only or [] if n not in names]
    if unknown:
        _fail(f"unknown check {', '.join(unknown)} (available: {', '.join(names)})")
    options = {}
    if recipe:
        from kame_data.recipe import RecipeError, load_recipe

        try:
            options = recipe_options(load_recipe(recipe))
        except RecipeError as e:
            _fail(str(e))
    console = Console(highlight=False)
    with console.status("") as status:
        outcomes = diagnose(options, only, progress=lambda c: status.update(f"checking {c.name} …"))
    table = Table(title="kame-data doctor", title_justify="left")
    for col in ("engine", "version", "result", "time", "detail"):
        table.add_column(col, overflow="fold")
    colour = {"ok": "green", "skipped": "yellow"}
    for o in outcomes:
        table.add_row(o.check.name, Text(o.version), Text(o.status, style=colour.get(o.status, "red")),
                      f"{o.seconds:.1f} s", Text(o.detail))
    console.print(table)
    failed = [o for o in outcomes if o.failed and not o.check.optional]
    for o in outcomes:
        if o.failed or o.status == "skipped":
            console.print(f"{o.check.name}: {o.check.advice}", soft_wrap=True, markup=False)
    if failed:
        console.print(f"{len(failed)} engine(s) failed: {', '.join(o.check.name for o in failed)}", style="red",
                      markup=False)
        raise typer.Exit(1)
    console.print("[green]all engines work on this machine[/]")


@app.command("plan")
def plan_cmd(
    recipe: str = typer.Argument(..., help="Recipe YAML path, or a bundled recipe name such as 'kame_paper'."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """Show what a recipe would produce and cost, without running or downloading anything:
    items and dialogues per source, expected hours of audio, LLM calls and tokens.

    Example:  kame-data plan recipes/kame_paper.yaml
    """
    import json

    from kame_data.plan import format_plan, plan_recipe
    from kame_data.recipe import RecipeError, load_recipe

    try:
        plan = plan_recipe(load_recipe(recipe))
    except RecipeError as e:
        _fail(str(e))
    typer.echo(json.dumps(plan.to_dict(), indent=2) if as_json else format_plan(plan))


@app.command("train")
def train_cmd(
    recipe: str = typer.Argument(..., help="Training recipe YAML path, or a bundled name such as 'train_tiny'."),
    dataset: Path = typer.Option(..., "--dataset", "-d", help="A dataset folder written by `kame-data run`."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder (default: out/train/<recipe name>)."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", min=1, help="Train this many optimizer steps instead of the recipe's."),
    restart: bool = typer.Option(False, "--restart", help="Ignore existing checkpoints in OUT and start over."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Fine-tune a Moshi-based tandem model with an oracle stream on a dataset.

    Tokenises the dataset (Mimi codes, SentencePiece text, oracle events) into OUT/tokens in
    kame_finetune's prepare_dataset layout, then trains, writing OUT/metrics.jsonl,
    OUT/checkpoints/ and OUT/model.safetensors. A run whose checkpoints exist resumes exactly
    where it stopped. Needs the train extra (PyTorch and moshi).

    Example:  kame-data train recipes/train_tiny.yaml --dataset out/quickstart
    """
    try:
        import kame_data.train as kt

        kt.require()
        from kame_data.train.loop import train as run_training
    except ImportError as e:
        _fail(str(e) if "kame-data[train]" in str(e) else
              f"training could not load its dependencies ({e}); install them with: pip install 'kame-data[train]' "
              "&& pip install --no-deps moshi==0.2.13", 1)
    _console_logging()
    try:
        result = run_training(recipe, dataset, out, max_steps=max_steps, restart=restart,
                              progress=_tqdm_factory(quiet))
    except kt.TrainError as e:
        _fail(str(e), 1)
    typer.echo("")
    typer.secho(f"model: {result.weights.resolve()}", fg=typer.colors.GREEN, bold=True)
    last = result.last
    summary = f"  {result.steps} steps" + (f" (resumed at {result.resumed_from})" if result.resumed_from else "")
    if last:
        summary += f", last loss {last['loss']:.3f} (text {last['text_loss']:.3f}, audio {last['audio_loss']:.3f})"
    if result.eval:
        summary += f", eval loss {result.eval['eval_loss']:.3f}"
    typer.echo(summary + f" in {result.seconds:.0f} s")
    typer.echo(f"  tokens:  {result.tokens.resolve()}")
    typer.echo(f"  metrics: {(result.out / 'metrics.jsonl').resolve()}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
