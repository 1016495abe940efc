"""The `kame-data` command line. Thin: parses, loads a recipe, calls the library, shows progress."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from kame_data.cli import dataset_cmds, doctor_cmd, review_cmds, speech_cmds
from kame_data.cli.common import console_logging as _console_logging
from kame_data.cli.common import fail as _fail

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
    until: Optional[str] = typer.Option(None, "--until", help="Stop after this stage (sources, script, speak, "
                                        "oracle) and write its records as JSON lines: OUT/items.jsonl, "
                                        "scripts.jsonl, rendered.jsonl or samples.jsonl, plus rejects.jsonl."),
) -> None:
    """Run a recipe end to end: sources -> script -> speak -> oracle -> publish.

    Writes OUT/data/*.parquet (audio as a Hugging Face Audio feature), OUT/README.md (dataset
    card), OUT/manifest.json, OUT/rejects.jsonl (every dropped item with a reason code) and
    OUT/run.log. Each stage's result per item is checkpointed in OUT/.checkpoints: after a crash
    or kill, the same command resumes; after a config change only the changed stage and the
    later ones are recomputed.

    With --until, stop early and read the output, e.g. every spoken script of a benchmark in
    seconds, before paying for speech and LLM calls:

        kame-data run recipes/kame_paper.yaml --until script --out out/scripts

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
                            executor=executor, ray_address=ray_address, resume=not no_resume, until=until)
    except (RunError, SourceError, RecipeError) as e:
        _fail(str(e), 1)
    m = result.manifest
    if until:
        typer.secho(f"stopped after {until}: {m['records']} records in {m['path']}", fg=typer.colors.GREEN)
        typer.echo(f"  rejects: {(out_dir / 'rejects.jsonl').resolve()} ({len(result.rejects)})")
        return
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


# The dataset and reviewer commands live beside this module; registered here, in help order.
dataset_cmds.register(app)
review_cmds.register(app)
doctor_cmd.register(app)
speech_cmds.register(app)


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
