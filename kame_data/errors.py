"""Errors that end a run rather than one item, and the reject of an item our own code failed on:
the line between the two, drawn once for every stage.

Any exception a stage raises on one input (a bug, or a row no one foresaw) costs only that input:
it becomes an `internal_error` reject and the run goes on, so one bad row never stops a
paper-scale run (runner/executor.py for the steps, sources/ for reading rows). `RunAbort` is
different: a spent budget, a service that is down or refuses the key, a native engine crash that
took its worker with it. Those say nothing about the item, every later item would meet them too,
so the run stops (cleanly, publishing what is done where that makes sense).
"""

from __future__ import annotations

import logging

from kame_data.records import Reject
from kame_data.scrub import scrub

INTERNAL_ERROR = "internal_error"
_log = logging.getLogger("kame_data.errors")


class RunAbort(RuntimeError):
    """Not the item's fault: the run stops. Subclasses say why (budget, service, engine)."""


def internal_error(stage: str, item_id: str, error: BaseException, log: logging.Logger | None = None) -> Reject:
    """The reject of one input our code raised on: transient, so it is not checkpointed and the
    next run (with the bug fixed) tries it again; the exception's type and scrubbed message in its
    detail, the traceback in the log (run.log) and one line on the console."""
    log = log or _log
    detail = scrub(f"{type(error).__name__}: {error}")[:300]
    log.info("%s raised on %s", stage, item_id, exc_info=error)
    log.warning("%s failed on %s (%s); it is rejected as %s and the run goes on (traceback in run.log)",
                stage, item_id, detail, INTERNAL_ERROR)
    return Reject(stage, item_id, INTERNAL_ERROR, detail, transient=True)
