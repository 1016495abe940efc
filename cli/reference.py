"""The Typer app as the click command it runs: what the docs site's command-line reference
(mkdocs-click, `docs/reference/cli.md`) documents, every command and option from the code."""

import typer

from kame_data.cli.main import app

command = typer.main.get_command(app)
