"""`kame-data plan --cores/--gpus/--nodes`: wall time per stage from the shipped calibration, the
stage that bounds the run, and the arithmetic behind it."""

import json
import subprocess

import pytest

from kame_data.plan.planner import plan_recipe
from kame_data.plan.projection import Resources, load_calibration, project
from kame_data.recipe import load_recipe
from kame_data.speech.voices import POOLS
from tests.conftest import CLI

CAL = {"machine": "test", "measured": "today", "speak_core_s_per_audio_s": {"piper": 0.2, "espeak": 0.01},
       "qa_core_s_per_audio_s": 0.1, "script_template_core_s_per_dialogue": 0.01, "write_s_per_audio_s": 0.02,
       "llamacpp": {"oracle": {"core_s_per_call": 0.5}, "script": {"core_s_per_call": 4.0}}}


def test_shipped_calibration_has_every_rate():
    cal = load_calibration()
    assert set(cal["speak_core_s_per_audio_s"]) >= {"piper", "espeak", "hibari"}
    assert all(v > 0 for v in cal["speak_core_s_per_audio_s"].values())
    assert cal["llamacpp"]["oracle"]["core_s_per_call"] > 0 and cal["llamacpp"]["script"]["core_s_per_call"] > 0
    assert cal["qa_core_s_per_audio_s"] >= 0 and cal["write_s_per_audio_s"] >= 0 and "command" in cal


def test_arithmetic_cpu_stages_share_the_cores_and_the_writer_has_one():
    speech = {"piper": 3600.0, "espeak": 1800.0}  # seconds of audio per engine
    llm = {"oracle": {"kind": "llamacpp", "calls": 1000, "tokens": 1e5}}
    p = project(100, speech, llm, 1.0, Resources(cores=4), CAL)
    by = {s.stage: s for s in p.stages}
    assert by["speak"].work == pytest.approx(3600 * 0.2 + 1800 * 0.01 + 5400 * 0.1)
    assert by["speak"].wall_s == pytest.approx(by["speak"].work / 4)
    assert by["oracle"].work == pytest.approx(500) and by["script"].work == pytest.approx(1.0)
    assert by["write"].wall_s == pytest.approx(108.0)  # one core, whatever the cluster
    cpu = sum(s.work for s in p.stages if s.resource == "cpu") / 4
    assert p.total_s == pytest.approx(max(cpu, 108.0)) and p.bounding.stage == "speak"
    wide = project(100, speech, llm, 1.0, Resources(cores=4, nodes=8), CAL)
    assert {s.stage: s.wall_s for s in wide.stages}["speak"] == pytest.approx(by["speak"].wall_s / 8)
    assert wide.bounding.stage == "write"  # 32 cores: the single-core writer is the limit now
    sampled = {s.stage: s for s in project(100, speech, llm, 0.25, Resources(cores=4), CAL).stages}["speak"]
    assert sampled.work == pytest.approx(3600 * 0.2 + 1800 * 0.01 + 5400 * 0.1 * 0.25)  # speak.qa.sample 0.25
    assert "Whisper QA 0.100 x 0.25 sampled" in sampled.basis


def test_whisper_qa_moves_to_the_gpus_where_measured_and_asked_for():
    """device auto (or cuda) with GPUs: QA keeps its measured CPU share and adds a GPU stage; device
    cpu, no GPUs, or no GPU rate in the calibration: QA stays whole on the cores."""
    speech = {"piper": 3600.0}
    cal = {**CAL, "qa_gpu": {"gpu_s_per_audio_s": 0.02, "cpu_share": 0.4, "measured": "on a test GPU"}}
    on = {s.stage: s for s in project(10, speech, {}, 0.5, Resources(cores=4, gpus=2), cal).stages}
    assert on["speak"].work == pytest.approx(3600 * 0.2 + 3600 * 0.5 * 0.1 * 0.4)
    assert on["speak:whisper"].resource == "gpu" and on["speak:whisper"].work == pytest.approx(3600 * 0.5 * 0.02)
    assert on["speak:whisper"].wall_s == pytest.approx(3600 * 0.5 * 0.02 / 2) and "on a test GPU" in on["speak:whisper"].basis
    for res, c, device in ((Resources(cores=4, gpus=2), cal, "cpu"), (Resources(cores=4), cal, "auto"),
                           (Resources(cores=4, gpus=2), CAL, "auto")):
        off = {s.stage: s for s in project(10, speech, {}, 0.5, res, c, device=device).stages}
        assert "speak:whisper" not in off and off["speak"].work == pytest.approx(3600 * 0.2 + 3600 * 0.5 * 0.1)


def test_step_parts_use_the_calibration_where_it_measured_them():
    speech = {"piper": 1000.0}
    parts = {"speak": {"answer": 0.1}, "quality": {"quality": 0.05}, "acoustics": {"acoustics": 0.025}}
    cal = CAL | {"steps": {"quality": 0.2}}
    by = {s.stage: s for s in project(10, speech, {}, 0.0, Resources(cores=2), cal, parts).stages}
    assert by["speak"].work == pytest.approx(1000 * (0.2 + 0.1)) and "answer 0.100 (declared" in by["speak"].basis
    assert by["quality"].work == pytest.approx(200.0) and "declared" not in by["quality"].basis  # measured
    assert by["acoustics"].work == pytest.approx(25.0) and "declared, not calibrated" in by["acoustics"].basis


def test_each_worker_process_adds_its_set_up_once():
    """A step's set-up per worker (start-up, models) is added once per core's worker, whatever the
    audio: most of a small run's acoustics, nothing at paper scale."""
    parts = {"acoustics": {"acoustics": 0.01}}
    cal = CAL | {"setup_core_s_per_worker": {"acoustics": 3.0, "speak": 5.0}}
    for cores, audio in ((2, 100.0), (16, 1e6)):
        by = {s.stage: s for s in project(10, {"piper": audio}, {}, 0.0, Resources(cores=cores), cal, parts).stages}
        assert by["acoustics"].work == pytest.approx(audio * 0.01 + 3.0 * cores)
        assert by["speak"].work == pytest.approx(audio * 0.2 + 5.0 * cores)
        assert f"3.0 core-s per worker x {cores}" in by["acoustics"].basis
    assert {s.stage: s.work for s in project(10, {"piper": 100.0}, {}, 0.0, Resources(cores=2), CAL, parts).stages
            }["acoustics"] == pytest.approx(1.0)  # a calibration without set-ups: rates alone
    # the embedded model loads once per instance, one instance per core
    llm = {"oracle": {"kind": "llamacpp", "calls": 100, "tokens": 1e4}}
    cal = CAL | {"llamacpp": {**CAL["llamacpp"], "oracle": {"core_s_per_call": 0.5, "setup_core_s_per_instance": 2.0}}}
    by = {s.stage: s for s in project(10, {"piper": 100.0}, llm, 0.0, Resources(cores=4), cal).stages}
    assert by["oracle"].work == pytest.approx(100 * 0.5 + 2.0 * 4) and "2.0 core-s per instance x 4" in by["oracle"].basis


def test_the_quickstart_plan_counts_every_step_it_runs():
    plan = plan_recipe(load_recipe("recipes/quickstart.yaml"))
    stages = {s.stage for s in plan.project(Resources(cores=2)).stages}
    assert {"script", "speak", "quality", "acoustics", "oracle", "write"} <= stages
    assert set(plan.cpu_hours()) == stages
    # its sources are small local files: the plan scripts all of them as the run does (12 dialogues)
    assert plan.total("kept") == 12
    assert any("turn lengths from 4 of its own items" in n for n in plan.notes)


def test_a_service_backend_runs_at_its_given_throughput_or_is_unknown():
    speech = {"piper": 3600.0}
    llm = {"oracle": {"kind": "vllm", "calls": 1000, "tokens": 2e6}}
    known = project(10, speech, llm, 0.0, Resources(cores=8, gpus=1, llm_tokens_per_s=5000.0), CAL)
    oracle = next(s for s in known.stages if s.stage == "oracle")
    assert (oracle.resource, oracle.wall_s) == ("gpu", pytest.approx(400.0))
    assert known.bounding.stage == "oracle" and known.total_s == pytest.approx(400.0)
    unknown = project(10, speech, llm, 0.0, Resources(cores=8, gpus=1), CAL)
    assert unknown.total_s is None and any("--llm-tokens-per-s" in n for n in unknown.notes)
    cost = project(10, speech, llm, 0.0, Resources(cores=8, gpus=1, llm_tokens_per_s=5000.0,
                                                     usd_per_core_hour=0.05, usd_per_gpu_hour=3.6), CAL)
    assert cost.machine_cost() == pytest.approx(400 / 3600 * (8 * 0.05 + 3.6))


def test_paper_plan_on_more_cores_takes_less_time():
    plan = plan_recipe(load_recipe("kame_paper"))
    # the user casts the screened pool `users` (hibari, piper variants and Kokoro), not one espeak voice
    assert {"piper", "hibari", "kokoro"} <= set(plan.speech_seconds) and "espeak" not in plan.speech_seconds
    users = plan.voices["user"]
    assert users["voices"] == list(POOLS["users"]) and sum(users["engines"].values()) == pytest.approx(1, abs=1e-3)
    kokoro = plan.speech_seconds["kokoro"] / sum(plan.speech_seconds.values())
    assert 0.05 < kokoro < users["engines"]["kokoro"]  # a share of the user's speech, none of the assistant's
    assert sum(plan.speech_seconds.values()) / 3600 == pytest.approx(plan.to_dict()["totals"]["audio_hours"], rel=0.01)
    assert plan.llm["oracle"]["calls"] == plan.to_dict()["totals"]["oracle_calls"]
    assert "script" not in plan.llm  # style auto with the embedded model: no rewrites paid for
    small = plan.project(Resources(cores=16, gpus=1)).total_s
    big = plan_recipe(load_recipe("kame_paper")).project(Resources(cores=16, nodes=4)).total_s
    assert small > big > 0


def test_cli_prints_wall_time_per_stage_and_the_bounding_stage():
    r = subprocess.run(CLI + ["plan", "recipes/kame_paper.yaml", "--cores", "16", "--gpus", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "wall time on 1 node x 16 cores + 1 GPU" in out
    assert f"user voices: {len(POOLS['users'])} (heart, " in out and "kokoro" in out
    for stage in ("script", "speak", "oracle", "write"):
        assert any(line.strip().startswith(stage) for line in out.splitlines()), stage
    total = next(line for line in out.splitlines() if line.strip().startswith("total") and "bounded by" in line)
    assert "bounded by oracle" in total
    j = json.loads(subprocess.run(CLI + ["plan", "kame_paper", "--cores", "16", "--nodes", "2", "--json"],
                                  capture_output=True, text=True, timeout=120).stdout)
    assert j["projection"]["resources"]["nodes"] == 2 and j["projection"]["bounding_stage"] == "oracle"
    assert j["projection"]["total_s"] > 0


def test_audio_length_follows_the_calibrated_speaking_rates(monkeypatch):
    """A dialogue lasts its turns' words over the voices' measured words per second (the
    calibration's, by engine), not the engine table's declared rate."""
    import kame_data.plan.planner as plan_module

    shipped = load_calibration()
    assert set(shipped["words_per_second"]) >= {"piper", "hibari", "kokoro"}
    assert all(2.0 < v < 4.5 for v in shipped["words_per_second"].values())  # people speak 2-4 words a second
    recipe = load_recipe("recipes/quickstart.yaml")
    slow = {**shipped, "words_per_second": {e: 2.0 for e in shipped["words_per_second"]}}
    fast = {**shipped, "words_per_second": {e: 4.0 for e in shipped["words_per_second"]}}
    seconds = {}
    for name, cal in (("slow", slow), ("fast", fast)):
        monkeypatch.setattr(plan_module, "load_calibration", lambda path=None, cal=cal: cal)
        seconds[name] = sum(s.seconds_per_dialogue for s in plan_recipe(recipe).sources)
    # speech halves when the rate doubles; the pauses (lead-in, gaps, tail) stay
    assert seconds["fast"] < 0.6 * seconds["slow"] and seconds["fast"] > 0.5 * seconds["slow"]


def test_the_plan_says_when_its_rates_come_from_another_cpu():
    from kame_data.machine import cpu_description, cpu_fingerprint

    speech, llm = {"piper": 3600.0}, {"oracle": {"kind": "llamacpp", "calls": 10, "tokens": 1e3}}
    here = {**CAL, "cpu": cpu_description(), "cpu_fingerprint": cpu_fingerprint()}
    notes = project(10, speech, llm, 1.0, Resources(cores=2), here).notes
    assert any(cpu_description() in n for n in notes)  # where the rates were measured
    assert not any("is not the one the rates were measured on" in n for n in notes)
    remeasured = {**here, "remeasured": [{"only": "oracle", "cpu_fingerprint": "SomeVendor:avx2"}]}
    for other in ({**here, "cpu_fingerprint": "SomeVendor:avx2"}, CAL, remeasured):  # another CPU, or none recorded
        warned = [n for n in project(10, speech, llm, 1.0, Resources(cores=2), other).notes
                  if "is not the one the rates were measured on" in n]
        assert len(warned) == 1 and "benchmarks/calibrate.py --out FILE" in warned[0]
        assert ("SomeVendor:avx2" if other is not CAL else "not recorded") in warned[0]


def test_a_qa_sample_on_the_cpu_and_every_turn_on_a_gpu():
    """speak.qa.sample 0.05 with gpu_sample 1 (the paper recipe): the cores hear 5% of the audio, and the
    answer round trip is paid on that 5% only; with GPUs Whisper hears it all there."""
    speech = {"piper": 1000.0}
    parts = {"speak": {"answer": 0.1}}
    cal = {**CAL, "qa_gpu": {"gpu_s_per_audio_s": 0.02, "cpu_share": 0.4, "measured": "on a test GPU"}}
    cpu = {s.stage: s for s in project(10, speech, {}, (0.05, 1.0), Resources(cores=2), cal, parts).stages}
    assert cpu["speak"].work == pytest.approx(1000 * (0.2 + 0.05 * 0.1 + 0.05 * 0.1))
    assert "x 0.05 sampled" in cpu["speak"].basis and "speak:whisper" not in cpu
    gpu = {s.stage: s for s in project(10, speech, {}, (0.05, 1.0), Resources(cores=2, gpus=1), cal, parts).stages}
    assert gpu["speak:whisper"].work == pytest.approx(1000 * 1.0 * 0.02)
    assert gpu["speak"].work == pytest.approx(1000 * (0.2 + 0.1 * 0.4 + 0.1))


def test_the_paper_plan_counts_its_qa_sample():
    plan = plan_recipe(load_recipe("kame_paper"))
    assert (plan.qa, plan.qa_gpu) == (0.05, 1.0)
    by = {s.stage: s for s in plan.project(Resources(cores=16)).stages}
    assert "Whisper QA" in by["speak"].basis and "x 0.05 sampled" in by["speak"].basis
