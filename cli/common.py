"""What every command module shares: how an error ends a command, and the console log."""

from __future__ import annotations

import logging
from typing import NoReturn

import typer

from kame_data.scrub import ScrubbingFormatter, scrub


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr (scrubbed of keys and tokens), then exit with `code`."""
    typer.secho(f"error: {scrub(message)}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def console_logging() -> None:
    """Warnings and errors on the console; the full INFO log goes to OUT/run.log (the runner's)."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(ScrubbingFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
