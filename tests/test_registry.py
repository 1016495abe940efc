"""Adding a step touches one place: a step from outside kame-data (tests/toy_step.py), registered
at run time, runs under both executors and shows in the manifest, `--until`, `plan` and the
checkpoints, with nothing else changed."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from kame_data import pipeline
from kame_data.recipe import load_recipe
from tests import toy_step
from tests.loopback_server import LoopbackServer

HERE = Path(__file__).parent


def recipe(tmp: Path, base_url: str, **extra) -> Path:
    raw = {"name": "toy-run", "seed": 2, "batch_size": 2,
           "sources": [{"kind": "gsm8k", "path": str(HERE / "data" / "sources" / "gsm8k_test_200.jsonl")}],
           "speak": {"assistant": {"engine": "espeak", "voice": "en-us"},
                     "user": {"engine": "espeak", "voice": "en-us+f3"}, "workers": 1},
           "oracle": {"backend": {"kind": "openai", "model": "loopback", "base_url": base_url}}, **extra}
    path = tmp / "toy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def categories(out: Path) -> list[str]:
    return [c for p in sorted((out / "data").glob("*.parquet")) for c in pq.read_table(p)["category"].to_pylist()]


def test_the_registry_orders_steps_and_refuses_clashes():
    assert pipeline.names() == ["script", "speak", "quality", "acoustics", "oracle"]
    with pipeline.registered(toy_step.SPEC):
        assert pipeline.names() == ["script", "speak", "quality", "acoustics", "toy", "oracle"]
        with pytest.raises(ValueError, match="already registered"):
            pipeline.register(toy_step.SPEC)
    assert "toy" not in pipeline.names()
    with pytest.raises(pipeline.UnknownStep, match="no step 'toy'"):
        pipeline.spec("toy")


def test_a_registered_step_is_in_the_plan_and_the_run_config(tmp_path):
    from kame_data.plan.planner import format_plan, plan_recipe
    from kame_data.plan.projection import Resources
    from kame_data.runner.config import RunConfig

    with pipeline.registered(toy_step.SPEC):
        r = load_recipe(recipe(tmp_path, "http://127.0.0.1:9"))
        config = RunConfig.resolve(r)
        assert config.toy == toy_step.ToyConfig() and config.to_dict()["toy"] == {"tag": "toy", "min_words": 1}
        assert [type(s).__name__ for s in config.build_steps()][-2:] == ["ToyStep", "OracleStage"]
        plan = plan_recipe(r)
        assert plan.to_dict()["steps"][-2:] == ["toy", "oracle"] and plan.step_parts["toy"] == {"toy": 0.5}
        toy = next(s for s in plan.project(Resources(cores=2)).stages if s.stage == "toy")
        assert toy.work == pytest.approx(0.5 * sum(plan.speech_seconds.values()))  # its declared rate
        assert "toy 0.500 (declared, not calibrated)" in toy.basis
        assert "toy" in format_plan(plan)


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.slow)])  # Ray: a cluster
def test_a_registered_step_runs_under_both_executors(tmp_path, monkeypatch, executor):
    from kame_data.runner import run_recipe

    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path / "cache"))
    with pipeline.registered(toy_step.SPEC), LoopbackServer(latency=0.0) as srv:
        r = load_recipe(recipe(tmp_path, srv.base_url))
        env = {"py_modules": [str(HERE)]} if executor == "ray" else None  # the toy step's module, on the workers
        until = run_recipe(r, tmp_path / "until", limit=3, until="toy", executor=executor, ray_runtime_env=env)
        assert Path(until.manifest["path"]).name == "toyed.jsonl" and until.manifest["records"] == 3
        result = run_recipe(r, tmp_path / "out", limit=3, executor=executor, ray_runtime_env=env)
    m = result.manifest
    assert m["toy"] == {"seen": 3} and m["computed"]["toy"] == 3 and m["counts"]["toy"] == 3
    assert list(m["computed"]) == ["script", "speak", "quality", "acoustics", "toy", "oracle"]
    assert sorted(categories(tmp_path / "out")) == ["math+toy"] * 3
    assert m["recipe"]["toy"] == {"tag": "toy", "min_words": 1}
