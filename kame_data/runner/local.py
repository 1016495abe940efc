"""The local executor: every step busy at once on this machine.

Each step has a thread that takes batches from the step before, runs up to
`step.resources.concurrent_batches` of them at once (a speak pool renders dialogues of several
batches in parallel; LLM requests from several batches share the backend's in-flight window) and
passes results on in input order. Queues between steps are short, so memory stays flat however
many items a run has. The first error stops the feed; batches before it, and those already running
when it came, still reach the writer.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterator

from kame_data.runner.checkpoint import CheckpointStore, Keyed
from kame_data.runner.executor import BatchDone, RunStats, apply_step, step_key
from kame_data.step import Step

_END = object()
_POLL = 0.05


class _Failed:
    """Travels down the pipeline in the failed batch's place; the consumer raises it."""

    def __init__(self, error: BaseException):
        self.error = error


class LocalExecutor:
    name = "local"

    def __init__(self, queue_batches: int = 2):
        self.queue_batches = queue_batches

    def run(self, steps: list[Step], batches: Iterator[list[Keyed]], store: CheckpointStore | None,
            stats: RunStats, on_batch: BatchDone) -> Iterator[list[Keyed]]:
        stop = threading.Event()
        queues = [queue.Queue(self.queue_batches) for _ in range(len(steps) + 1)]
        threads = [threading.Thread(target=self._feed, args=(batches, queues[0], stop), daemon=True,
                                    name="kame-data-feed")]
        for i, step in enumerate(steps):
            threads.append(threading.Thread(target=self._stage, args=(step, queues[i], queues[i + 1], store, stats,
                                                                       on_batch, stop),
                                            daemon=True, name=f"kame-data-{step.name}"))
        for t in threads:
            t.start()
        try:
            while True:
                item = queues[-1].get()
                if item is _END:
                    return
                if isinstance(item, _Failed):
                    raise item.error
                yield item
        finally:
            stop.set()  # a consumer that stops early (error, budget) lets every thread wind down
            for t in threads:
                t.join()
            for step in steps:
                stats.summaries[step.name] = step.summary()

    @staticmethod
    def _put(q: queue.Queue, item, stop: threading.Event) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def _feed(self, batches: Iterator[list[Keyed]], out: queue.Queue, stop: threading.Event) -> None:
        try:
            for batch in batches:
                if not self._put(out, batch, stop):
                    return
        except BaseException as e:  # noqa: BLE001 - reading the input failed: report it downstream
            self._put(out, _Failed(e), stop)
            return
        self._put(out, _END, stop)

    def _stage(self, step: Step, inbox: queue.Queue, out: queue.Queue, store: CheckpointStore | None,
               stats: RunStats, on_batch: BatchDone, stop: threading.Event) -> None:
        key = step_key(step)
        width = max(1, step.resources.concurrent_batches)
        pending: deque[Future | _Failed] = deque()

        def work(batch: list[Keyed]) -> list[Keyed]:
            result, counts = apply_step(step, key, batch, store)
            stats.record(step.name, counts)
            on_batch(step.name, counts)
            return result

        def forward_done(block: bool) -> bool:
            """Pass finished batches on in order; False once a failure has been passed on."""
            while pending and (block or isinstance(pending[0], _Failed) or pending[0].done()):
                head = pending.popleft()
                if isinstance(head, _Failed):
                    self._put(out, head, stop)
                    return False
                try:
                    result = head.result()
                except BaseException as e:  # noqa: BLE001 - a step failed: stop, tell the consumer
                    for other in pending:  # batches already running finish and go on first (a budget
                        if isinstance(other, _Failed):  # stop publishes every dialogue it completed)
                            break
                        if other.exception() is None and not self._put(out, other.result(), stop):
                            return False
                    self._put(out, _Failed(e), stop)
                    return False
                if not self._put(out, result, stop):
                    return False
            return True

        with ThreadPoolExecutor(width, thread_name_prefix=f"kame-data-{step.name}") as pool:
            ended = False
            while not stop.is_set() and not ended:
                if not forward_done(block=False):
                    break
                if len(pending) >= width:
                    pending[0].exception()  # wait for the oldest batch to finish
                    continue
                try:
                    item = inbox.get(timeout=_POLL)
                except queue.Empty:
                    continue
                if item is _END:
                    ended = forward_done(block=True) and self._put(out, _END, stop)
                    break
                pending.append(item if isinstance(item, _Failed) else pool.submit(work, item))
            for f in pending:
                if isinstance(f, Future):
                    f.cancel()
