"""The `kame-data` command line. Thin: parses, loads a recipe, calls the library, shows progress."""

from __future__ import annotations

import logging
import time
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
) -> None:
    """Run a recipe end to end: sources -> script -> speak -> oracle -> publish.

    Writes OUT/data/*.parquet (audio as a Hugging Face Audio feature), OUT/README.md (dataset
    card), OUT/manifest.json, OUT/rejects.jsonl (every dropped item with a reason code) and
    OUT/run.log.

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
        result = run_recipe(r, out_dir, limit=limit, progress=_tqdm_factory(quiet), use_cache=not no_cache)
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


@app.command("validate")
def validate_cmd(out: Path = typer.Argument(..., help="An output folder written by `kame-data run`.")) -> None:
    """Check a dataset: schemas, word order and bounds, oracle events, audio format, shard counts.

    Exits 1 at the first violation and names its shard, row id and field.
    """
    from kame_data.io.validate import DatasetInvalid, validate_dataset

    try:
        report = validate_dataset(out)
    except DatasetInvalid as e:
        _fail(f"invalid dataset {out}: {e}", 1)
    typer.secho(f"ok: {out} ({report.rows} rows in {report.shards} shards, {report.events} oracle events)",
                fg=typer.colors.GREEN)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
