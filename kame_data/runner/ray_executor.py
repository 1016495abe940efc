"""The same recipe and stage functions on Ray Data: one `map_batches` per stage, each stage an
actor that loads its models once. Checkpoints and the LLM cache are the local executor's, so a
shared filesystem lets the two executors resume each other's runs."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Iterator

from kame_data.recipe import Recipe
from kame_data.runner.checkpoint import CheckpointStore, Keyed

log = logging.getLogger(__name__)

# CPU share each stage's actor reserves; two cores must hold all three at once.
_CPUS = {"script": 0.1, "speak": 1.0, "oracle": 0.5}


class _StageActor:
    """Builds the stage list in the actor and applies stage `index` to a batch of pickled records."""

    def __init__(self, recipe: Recipe, index: int, store_root: str | None, cache_path: str | None):
        from kame_data.llm.cache import RequestCache
        from kame_data.runner.run import build_stages, stage_keys

        cache = RequestCache(cache_path) if cache_path else None
        stages = build_stages(recipe, cache)
        self.stage = stages[index]
        self.stage.open()
        self.key = stage_keys(stages)[index]
        self.store = CheckpointStore(store_root) if store_root else None

    def __call__(self, batch):
        import pyarrow as pa

        from kame_data.runner.keyed import apply_stage

        keyed = [Keyed(k, pickle.loads(b)) for k, b in zip(batch.column("key").to_pylist(),
                                                            batch.column("blob").to_pylist())]
        out, _ = apply_stage(self.stage, self.key, keyed, self.store)
        return pa.table({"key": pa.array([k.key for k in out], pa.string()),
                         "blob": pa.array([pickle.dumps(k.record, protocol=pickle.HIGHEST_PROTOCOL) for k in out],
                                          pa.large_binary())})


def run_on_ray(recipe: Recipe, stage_names: list[str], items: list[Keyed], store: CheckpointStore | None,
               cache_path: Path | None, address: str | None = None) -> Iterator[Keyed]:
    """Yield the last stage's keyed outputs (rejects included) in input order."""
    try:
        import pyarrow as pa
        import ray
    except ImportError as e:
        raise RuntimeError("--executor ray needs `pip install 'ray[data]'`") from e

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
                 **({} if address else {"num_cpus": 2}))
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # rows come out as the local executor writes them
    ds = ray.data.from_arrow(pa.table({
        "key": pa.array([k.key for k in items], pa.string()),
        "blob": pa.array([pickle.dumps(k.record) for k in items], pa.large_binary()),
    }))
    for index, name in enumerate(stage_names):
        ds = ds.map_batches(
            _StageActor, batch_format="pyarrow", batch_size=recipe.batch_size, concurrency=1,
            num_cpus=_CPUS.get(name, 0.5),
            fn_constructor_kwargs=dict(recipe=recipe, index=index,
                                       store_root=str(store.root) if store else None,
                                       cache_path=str(cache_path) if cache_path else None))
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=recipe.batch_size):
        for k, b in zip(batch.column("key").to_pylist(), batch.column("blob").to_pylist()):
            yield Keyed(k, pickle.loads(b))
