"""What every command module shares: how an error ends a command, and the console log."""

from __future__ import annotations

import logging
from typing import NoReturn

import typer


def fail(message: str, code: int = 2) -> NoReturn:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def console_logging() -> None:
    """Warnings and errors on the console; the full INFO log goes to OUT/run.log (the runner's)."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
