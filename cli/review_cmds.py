"""The reviewer's commands: look at dialogues (inspect), judge them on a page (review), and
leave the flagged ones out (publish --exclude)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kame_data.cli.common import console_logging, fail
from kame_data.cli.dataset_cmds import OUT_HELP


def inspect_cmd(
    out: Path = typer.Argument(..., help=OUT_HELP),
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

    from kame_data.dataset.folder import DatasetDir, DatasetError
    from kame_data.review.inspect import render_dialogue, select_rows

    if id is not None and random_n is not None:
        fail("give --id or --random, not both")
    try:
        ds = DatasetDir.open(out, check_shards=True)
        rows = select_rows(ds, id=id, random_n=random_n, source=source, level=level, seed=seed)
    except DatasetError as e:
        fail(str(e), 1)
    console = Console(highlight=False)
    for i, row in enumerate(rows):
        if i:
            console.print(Rule())
        console.print(render_dialogue(row, level=level))


def review_cmd(
    out: Path = typer.Argument(..., help=OUT_HELP),
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
    from kame_data.dataset.folder import DatasetError
    from kame_data.review.html import write_review

    console_logging()
    try:
        page = write_review(out, output, sample=sample, seed=seed, audio=audio)
    except DatasetError as e:
        fail(str(e), 1)
    typer.secho(f"review page: {page.path.resolve()}", fg=typer.colors.GREEN)
    typer.echo(f"  {page.cards} of {page.dialogues} dialogues, audio: {page.audio}, {page.size / 1e6:.1f} MB")


def publish_cmd(
    out: Path = typer.Argument(..., help=OUT_HELP),
    exclude: Path = typer.Option(..., "--exclude", help="Flags JSON saved from the review page (or a JSON list of row ids)."),
    to: Optional[Path] = typer.Option(None, "--to", help="Write the result here (a new folder) instead of rewriting OUT in place."),
) -> None:
    """Rewrite the dataset without the rows flagged in review.

    Shards are rewritten under temporary names and then renamed; manifest.json (shard rows and
    sha256, counts), the card and rejects.jsonl (reason flagged_in_review) follow, so that
    `kame-data validate` still passes.

    Example:  kame-data publish out/quickstart --exclude flags-quickstart.json --to out/quickstart-reviewed
    """
    from kame_data.dataset.exclude import exclude_rows
    from kame_data.dataset.folder import DatasetError
    from kame_data.review.flags import FlagsError, load_flag_notes

    console_logging()
    try:
        result = exclude_rows(out, load_flag_notes(exclude), dest=to)
    except (FlagsError, DatasetError) as e:
        fail(str(e), 1)
    typer.secho(f"published: {result.dest.resolve()} ({result.kept} rows kept, {len(result.excluded)} excluded)",
                fg=typer.colors.GREEN)
    if result.unknown:
        typer.secho(f"  {len(result.unknown)} flagged id(s) not in the dataset: {', '.join(result.unknown[:5])}"
                    + (" …" if len(result.unknown) > 5 else ""), fg=typer.colors.YELLOW)


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect_cmd)
    app.command("review")(review_cmd)
    app.command("publish")(publish_cmd)
