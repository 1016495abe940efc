"""Reviewer tools: judge oracle ladders quickly.

`inspect` renders one dialogue and its ladder for the terminal, `html` writes a self-contained
review page (audio, timeline, ladder, flags), and `flags` reads the flags a reviewer saved from
that page; `kame_data.dataset.exclude` rewrites a dataset without the flagged rows.
"""

from kame_data.oracle.metrics import token_f1
from kame_data.review.flags import FlagsError, load_flags

__all__ = ["FlagsError", "load_flags", "token_f1"]
