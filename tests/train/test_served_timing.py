"""`oracle.timing: served` in the trainer (docs/design.md, "Oracle arrival"): events land where the
row's oracle_arrival says a KAME front-end reset its buffer, each reply's frames hold only the
tokens that arrived in time, and nothing of an older reply shows after a reset; `kame-data train`
runs on it."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from kame_data.train import missing_dependencies

pytestmark = pytest.mark.skipif(bool(missing_dependencies()), reason="kame_data.train needs torch and moshi")


def _config(timing: str):
    from kame_data.train.config import config_from_dict

    return config_from_dict({"data": {"eval_split": None}, "oracle": {"timing": timing}})


def test_served_events_follow_the_rows_arrival(tmp_path):
    from kame_data.train.tokenize import open_dataset
    from kame_data.train.streams import TEXT_PAD_ID, OracleEvents, oracle_frames
    from kame_data.train.tokenize import open_token_dataset, read_token_rows, tokenize_dataset

    from tests.synthetic import spoken_dataset

    data = spoken_dataset(tmp_path / "ds", 3, latency="stress")
    rows = {r["id"]: r for r in open_dataset(data).rows()}
    info = tokenize_dataset(data, tmp_path / "tok", _config("served"))
    tok_rows = read_token_rows(info.files("train"))
    start = 99_999
    skipped_somewhere = False
    for tr in tok_rows:
        row = rows[tr["dialogue_id"]]

        ev = OracleEvents.from_columns(tr, "A_oracle")
        assert ev.served
        played = [(e, a) for e, a in zip(row["oracle"], row["oracle_arrival"]) if a["frame"] is not None and e["channel"] == 0]
        # every played reply is an event, at its reset frame, with the next reply's frame as its end
        assert ev.frame_pos.tolist() == [a["frame"] for _, a in played][:len(ev)]
        assert [u for u in ev.until.tolist()] == [a["until"] if a["until"] is not None else -1 for _, a in played][:len(ev)]
        T = len(tr["A"][0])
        frames = oracle_frames(ev, T, start)
        for i in range(len(ev)):
            f, u = int(ev.frame_pos[i]), int(ev.until[i])
            stop = T if u < 0 else min(T, u)
            hint = ev.hint(i)
            seq = hint if (ev.ratio[i] >= 1.0 and hint.size) else ev.pred(i)
            mask = ev.read_mask(i, seq is hint)
            assert frames[f] == start
            for j in range(min(seq.size, stop - f - 1)):
                want = seq[j] if mask[j] else TEXT_PAD_ID
                assert frames[f + 1 + j] == want, (tr["dialogue_id"], i, j)
            # after the reply's tokens and before the next reset: pad, never an older reply's tokens
            assert all(x == TEXT_PAD_ID for x in frames[f + 1 + seq.size:stop])
            skipped_somewhere |= bool(mask.size and not mask.all())
    assert skipped_somewhere  # the stress preset is slower than a token per frame somewhere
    assert open_token_dataset(tmp_path / "tok").meta["key"]["tokenize"] == _config("served").tokenize_hash() \
        != _config("ideal").tokenize_hash()  # token data made for one timing is never reused for the other


def test_served_timing_needs_arrival_rows(tmp_path):
    from kame_data.train.errors import TrainError
    from kame_data.train.tokenize import tokenize_dataset

    from tests.synthetic import spoken_dataset

    data = spoken_dataset(tmp_path / "ds", 1)
    with pytest.raises(TrainError, match="oracle_arrival"):
        tokenize_dataset(data, tmp_path / "tok", _config("served"))


@pytest.mark.slow
def test_cli_trains_with_served_timing(tmp_path):
    from tests.synthetic import spoken_dataset

    data = spoken_dataset(tmp_path / "ds", 3, latency="hosted-slow")
    raw = yaml.safe_load(Path("recipes/train_tiny.yaml").read_text())
    raw.setdefault("oracle", {})["timing"] = "served"
    recipe = tmp_path / "served.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    out = tmp_path / "train"
    r = subprocess.run([os.sys.executable, "-m", "kame_data.cli.main", "train", str(recipe), "--dataset", str(data),
                        "--out", str(out), "--max-steps", "4", "--quiet"], capture_output=True, text=True,
                       timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    meta = json.loads((out / "tokens" / "tokens.json").read_text())
    assert meta["splits"]["train"]["events"]["A"] > 0
    recs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in x and np.isfinite(x["loss"]) for x in recs)
