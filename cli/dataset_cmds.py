"""The commands that check a finished dataset and carry it elsewhere: validate, export, push."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from kame_data.cli.common import console_logging, fail

OUT_HELP = "An output folder written by `kame-data run`."


def validate_cmd(out: Path = typer.Argument(..., help=OUT_HELP)) -> None:
    """Check a dataset: schemas, word order and bounds, oracle events, audio format, shard counts.

    Exits 1 at the first violation and names its shard, row id and field.
    """
    from kame_data.dataset.validate import DatasetInvalid, validate_dataset

    try:
        report = validate_dataset(out)
    except DatasetInvalid as e:
        fail(f"invalid dataset {out}: {e}", 1)
    typer.secho(f"ok: {out} ({report.rows} rows in {report.shards} shards, {report.events} oracle events, "
                f"{report.early_truth_events} at level 5 inside a turn)", fg=typer.colors.GREEN)


class ExportTarget(str, Enum):
    kame_finetune = "kame-finetune"
    moshi_finetune = "moshi-finetune"


def export_cmd(
    target: ExportTarget = typer.Argument(..., help="kame-finetune (audio/, text/, oracle_raw/) or moshi-finetune "
                                                    "(stereo WAVs + word alignments + JSONL index)."),
    out: Path = typer.Argument(..., help=OUT_HELP),
    dest: Path = typer.Argument(..., help="Folder to write the export into."),
    split: Optional[str] = typer.Option(None, "--split", "-s", help="Export only this split (default: every split)."),
    absolute: bool = typer.Option(False, "--absolute-paths", help="moshi-finetune: absolute WAV paths in the index."),
    timing: str = typer.Option("auto", "--timing", help="kame-finetune: oracle_raw's timestamp_ms is the ladder time "
                               "(ideal) or when the reply's first chunk arrived under the recipe's oracle.latency "
                               "(arrival, with the ladder time kept as ideal_timestamp_ms); auto: arrival when the "
                               "rows carry it. DEST/README.md says which."),
) -> None:
    """Write a dataset in the layout a trainer reads as is.

    kame-finetune: DEST/audio/<id>.wav, DEST/text/<id>.json, DEST/oracle_raw/<id>.json (with several
    splits and no --split, one such folder per split under DEST/<split>/).
    moshi-finetune: DEST/data_stereo/<id>.wav + <id>.json alignments, DEST/<split>.jsonl.
    Ids that are not plain file names are cleaned; DEST/id_map.json maps them back.

    Example:  kame-data export kame-finetune out/quickstart out/quickstart-kame
    """
    from kame_data.dataset.export import export_kame_finetune, export_moshi_finetune
    from kame_data.dataset.folder import DatasetError

    console_logging()
    try:
        if target is ExportTarget.kame_finetune:
            report = export_kame_finetune(out, dest, split=split, timing=timing)
        else:
            report = export_moshi_finetune(out, dest, split=split, absolute_paths=absolute)
    except DatasetError as e:
        fail(str(e), 1)
    typer.secho(f"exported {report.rows} dialogues ({target.value}) to {dest.resolve()}", fg=typer.colors.GREEN)
    if report.renamed:
        typer.echo(f"  {len(report.renamed)} ids were not plain file names; see id_map.json")


def push_cmd(
    out: Path = typer.Argument(..., help=OUT_HELP),
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

    console_logging()
    try:
        url = push_dataset(out, repo, private=private or None, revision=revision, validate=not no_validate)
    except PushError as e:
        fail(f"push failed: {e}", 1)
    typer.secho(f"pushed {out} to {url}", fg=typer.colors.GREEN)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)
    app.command("export")(export_cmd)
    app.command("push")(push_cmd)
