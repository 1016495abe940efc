"""Errors that end a run rather than one item: the line between the two, drawn once.

The executor turns any other exception raised while a step works on a batch into a reject of
the item that caused it (`internal_error`), so one bad row never stops a paper-scale run. These
are different: a spent budget, a service that is down or refuses the key, a native engine crash
that took its worker with it. They say nothing about the item, and every later item would meet
them too, so the run stops (cleanly, publishing what is done, where that makes sense).
"""

from __future__ import annotations


class RunAbort(RuntimeError):
    """Not the item's fault: the run stops. Subclasses say why (budget, service, engine)."""
