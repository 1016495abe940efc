"""`kame-data doctor`: does every engine really work on this machine? A table, then advice."""

from __future__ import annotations

from typing import Optional

import typer

from kame_data.cli.common import fail


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

    from kame_data.doctor import CHECKS, diagnose, recipe_options

    names = [c.name for c in CHECKS]
    unknown = [n for n in only or [] if n not in names]
    if unknown:
        fail(f"unknown check {', '.join(unknown)} (available: {', '.join(names)})")
    options = {}
    if recipe:
        from kame_data.recipe import RecipeError, load_recipe

        try:
            options = recipe_options(load_recipe(recipe))
        except RecipeError as e:
            fail(str(e))
    console = Console(highlight=False)
    with console.status("") as status:
        outcomes = diagnose(options, only, progress=lambda c: status.update(f"checking {c.name} …"))
    console.print(_table(outcomes))
    _advise(console, outcomes)


def _table(outcomes):
    from rich.table import Table
    from rich.text import Text

    table = Table(title="kame-data doctor", title_justify="left")
    for col in ("engine", "version", "result", "time", "detail"):
        table.add_column(col, overflow="fold")
    colour = {"ok": "green", "skipped": "yellow"}
    for o in outcomes:
        table.add_row(o.check.name, Text(o.version), Text(o.status, style=colour.get(o.status, "red")),
                      f"{o.seconds:.1f} s", Text(o.detail))
    return table


def _advise(console, outcomes) -> None:
    """What to do about each failed or skipped engine; exit 1 when a required one failed."""
    failed = [o for o in outcomes if o.failed and not o.check.optional]
    for o in outcomes:
        if o.detail.startswith("DeviceUnavailable"):  # installed, but not where the recipe's device asks
            console.print(f"{o.check.name}: {o.detail.partition(': ')[2]}", soft_wrap=True, markup=False)
        elif o.failed or o.status == "skipped":
            console.print(f"{o.check.name}: {o.check.advice}", soft_wrap=True, markup=False)
    if failed:
        console.print(f"{len(failed)} engine(s) failed: {', '.join(o.check.name for o in failed)}", style="red",
                      markup=False)
        raise typer.Exit(1)
    console.print("[green]all engines work on this machine[/]")


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_cmd)
