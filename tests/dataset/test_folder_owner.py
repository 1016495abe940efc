"""One owner of the output folder, and what may never leave it: the folder's lock,
the recipe it belongs to, exclusions that outlive a rerun, shard checksums checked before any
export, review or push, names and splits that stay inside OUT/DEST, and YAML that cannot explode.

Fast tests on the tiny synthetic dataset of review/test_review.py and on real subprocesses; the
runs against the loopback OpenAI server are in test_folder_runs.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kame_data.dataset.exclude import EXCLUSIONS, REASON, exclude_rows, read_exclusions
from kame_data.dataset.export import export_kame_finetune
from kame_data.dataset.folder import DatasetDir, DatasetError
from kame_data.dataset.owner import (
    IDENTITY,
    UNKNOWN,
    FolderBusy,
    FolderClaimed,
    FolderLock,
    claim_folder,
    lock_holder,
)
from kame_data.dataset.shards import PublishConfigError, ShardWriter
from kame_data.dataset.validate import DatasetInvalid, validate_dataset
from kame_data.recipe import MAX_ALIAS_NODES, RecipeError, load_recipe, read_yaml_mapping
from tests.conftest import CLI
from tests.loopback_server import LoopbackServer
from tests.review.test_review import tiny_dataset

# Holds OUT's lock in a child process, says so on stdout, then waits to be killed.
HOLDER = ("import sys, time; from kame_data.dataset.owner import FolderLock; "
          "FolderLock.acquire(sys.argv[1], 'run'); print('held', flush=True); time.sleep(600)")


@pytest.fixture
def tiny(tmp_path) -> Path:
    return tiny_dataset(tmp_path / "tiny")


def cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, **env})


def error_line(r: subprocess.CompletedProcess) -> str:
    """The one line a refused command prints (and nothing else on stderr)."""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


# ---------- the lock ----------

def test_lock_names_its_holder_and_dies_with_it(tmp_path):
    out = tmp_path / "out"
    assert lock_holder(out) is UNKNOWN  # no folder, no lock file: nothing to ask
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        info = lock_holder(out)
        assert info["pid"] == holder.pid and info["command"] == "run"
        t = time.perf_counter()
        with pytest.raises(FolderBusy, match=rf"in use by `kame-data run` \(pid {holder.pid} on .+, since 20"):
            FolderLock.acquire(out, "run")
        assert time.perf_counter() - t < 2.0
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert lock_holder(out) is None  # the kernel dropped it with the process: nothing stale
    with FolderLock.acquire(out, "run"):
        assert lock_holder(out)["pid"] == os.getpid()
    assert lock_holder(out) is None


def test_publish_is_refused_while_a_run_holds_the_folder(tiny, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tiny)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusy, match=f"pid {holder.pid}"):
            exclude_rows(tiny, {"tiny-1-v0": ""})
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    validate_dataset(tiny)
    assert len(DatasetDir.open(tiny).ids()) == 3  # untouched


# ---------- the recipe a folder belongs to ----------

def test_a_folder_belongs_to_one_recipe(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    claim_folder(out, "alpha")
    claim_folder(out, "alpha")  # the same recipe, whatever its config
    (out / "data").mkdir()
    (out / "manifest.json").write_text("{}")
    (out / ".checkpoints").mkdir()
    with pytest.raises(FolderClaimed, match=r"holds the output of recipe 'alpha', not 'beta'.*--force deletes"):
        claim_folder(out, "beta")
    assert (out / "manifest.json").is_file()
    claim_folder(out, "beta", force=True)
    assert not (out / "manifest.json").exists() and not (out / "data").exists() and (out / ".checkpoints").is_dir()
    assert json.loads((out / IDENTITY).read_text()) == {"recipe": "beta"}


def test_a_folder_from_before_identity_files_is_known_by_its_manifest(tiny):
    with pytest.raises(FolderClaimed, match="recipe 'tiny'"):
        claim_folder(tiny, "other")


def test_validate_notices_a_folder_of_two_recipes(tiny):
    validate_dataset(tiny)
    (tiny / IDENTITY).write_text(json.dumps({"recipe": "other"}))
    with pytest.raises(DatasetInvalid, match=r"says the folder belongs to recipe 'other', manifest.json to recipe 'tiny'"):
        validate_dataset(tiny)
    (tiny / IDENTITY).unlink()
    # no identity file, but the progress.json another recipe's `--until script` run leaves: still named
    (tiny / "progress.json").write_text(json.dumps({"recipe": "other", "state": "done", "stages": {}}))
    r = cli("validate", str(tiny))
    assert r.returncode == 1 and "progress.json says the folder belongs to recipe 'other'" in error_line(r)


# ---------- exclusions are state ----------

def test_exclusions_are_kept_beside_the_dataset(tiny, tmp_path):
    exclude_rows(tiny, {"tiny-1-v0": "wrong answer"})
    assert read_exclusions(tiny) == {"tiny-1-v0": "wrong answer"}
    exclude_rows(tiny, {"tiny-0-v0": ""}, dest=tmp_path / "copy")  # a copy keeps the earlier ones too
    assert read_exclusions(tmp_path / "copy") == {"tiny-1-v0": "wrong answer", "tiny-0-v0": ""}
    assert read_exclusions(tiny) == {"tiny-1-v0": "wrong answer"}
    validate_dataset(tmp_path / "copy")
    (tiny / EXCLUSIONS).write_text('{"id": "x"}\nnot json\n')
    with pytest.raises(DatasetError, match=r"exclusions.jsonl line 2 is not"):
        read_exclusions(tiny)


def test_validate_notices_an_excluded_row_back_in_the_shards(tiny):
    m = json.loads((tiny / "manifest.json").read_text())
    m["review"] = {"excluded": ["tiny-2-v0"]}
    (tiny / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(DatasetInvalid, match=r"row tiny-2-v0, field id: row was excluded in review"):
        validate_dataset(tiny)


# ---------- checksums first ----------

def damage_in_place(path: Path) -> None:
    """Flip one byte in the middle of the file: same length, same name, different content."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("target", ["kame-finetune", "moshi-finetune"])
def test_export_refuses_a_shard_damaged_in_place(tiny, tmp_path, target):
    shard = tiny / "data" / "train-00001-of-00002.parquet"
    size = shard.stat().st_size
    damage_in_place(shard)
    assert shard.stat().st_size == size
    dest = tmp_path / "dest"
    r = cli("export", target, str(tiny), str(dest))
    assert r.returncode == 1
    assert ("shard data/train-00001-of-00002.parquet does not match its sha256" in error_line(r)
            and "rerun the `kame-data run` command" in error_line(r))
    assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*"))  # nothing written


def test_review_publish_and_push_refuse_a_damaged_shard(tiny, tmp_path):
    damage_in_place(tiny / "data" / "train-00000-of-00002.parquet")
    r = cli("review", str(tiny), "-o", str(tmp_path / "review.html"))
    assert r.returncode == 1 and "train-00000-of-00002.parquet does not match its sha256" in error_line(r)
    assert not (tmp_path / "review.html").exists()
    with pytest.raises(DatasetError, match="does not match its sha256"):  # its checksum would be made anew
        exclude_rows(tiny, {"tiny-0-v0": ""})
    with LoopbackServer() as srv:  # a reachable "hub": the push stops before any upload
        r = cli("push", str(tiny), "--repo", "someone/x", "--no-validate", HF_TOKEN="hf_x" * 8,
                HF_ENDPOINT=srv.base_url.rsplit("/v1", 1)[0], HF_HUB_OFFLINE="")
        assert srv.calls == 0
    assert r.returncode == 1 and "not pushing: shard data/train-00000-of-00002.parquet does not match" in r.stderr


# ---------- names and splits stay inside ----------

def test_a_recipe_name_never_leaves_the_working_folder(tmp_path, fixtures_dir):
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    recipe = work / "evil.yaml"
    recipe.write_text(f"name: ../../x\nsources: [{{kind: gsm8k, path: {fixtures_dir / 'gsm8k_test_200.jsonl'}}}]\n")
    r = cli("run", str(recipe), "--until", "sources", cwd=work)
    assert r.returncode == 2 and "name '../../x' must be a plain folder name" in error_line(r)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "evil.yaml", "work"]
    for bad in ("..", ".hidden", "a/b", "a\\b", "x" * 101, ""):
        recipe.write_text(json.dumps({"name": bad, "sources": [{"kind": "gsm8k", "path": "x.jsonl"}]}))
        with pytest.raises(RecipeError, match="name"):
            load_recipe(recipe)


def test_split_names_are_never_paths(tiny, tmp_path):
    with pytest.raises(PublishConfigError, match="split name '../x'"):
        ShardWriter(tmp_path / "w", split="../x")
    with pytest.raises(PublishConfigError, match="split name 'Train/..'"):
        ShardWriter(tmp_path / "w", splits=[("train", 0.5), ("Train/..", 0.5)])
    m = json.loads((tiny / "manifest.json").read_text())
    m["shards"][1]["split"] = "../../escaped"
    (tiny / "manifest.json").write_text(json.dumps(m))
    dest = tmp_path / "sandbox" / "dest"
    for target in ("kame-finetune", "moshi-finetune"):
        r = cli("export", target, str(tiny), str(dest))
        assert r.returncode == 1 and "split='../../escaped' is not data/<split>-NNNNN-of-NNNNN.parquet" in error_line(r)
    assert not (tmp_path / "escaped").exists() and not dest.exists()
    m["shards"][1].update(split="train", path="data/../../outside-00000-of-00001.parquet")
    (tiny / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(DatasetError, match="refusing to use it"):
        exclude_rows(tiny, {"tiny-0-v0": ""})
    with pytest.raises(DatasetInvalid, match=r"shards\[1\]\.path: .* does not match"):
        validate_dataset(tiny)


# ---------- YAML and text that cannot hurt ----------

# "Billion laughs": nine levels of nine aliases of the level below, about 600 bytes.
BOMB = "name: bomb\nsources: [{kind: gsm8k, path: x.jsonl}]\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{k}: &{k} [{', '.join([f'*{below}'] * 9)}]\n" for below, k in zip("abcdefgh", "bcdefghi"))


def test_a_yaml_alias_bomb_is_refused_cheaply(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 700
    t = time.perf_counter()
    with pytest.raises(RecipeError, match=rf"{path}: refused: its aliases expand it to [0-9,]{{11,}} nodes"):
        load_recipe(path)
    assert time.perf_counter() - t < 1.0
    path.write_text("name: r\na: &a [1, *a]\nsources: []\n")
    with pytest.raises(RecipeError, match="an alias refers to a node that contains it"):
        load_recipe(path)
    # aliases that add a little are fine: a recipe may reuse a block
    path.write_text("name: r\nv: &v {engine: piper, voice: joe}\nw: [*v, *v]\n")
    assert read_yaml_mapping(path)["w"] == [{"engine": "piper", "voice": "joe"}] * 2
    wide = "name: r\nb: &b [" + ", ".join(["0"] * 1000) + "]\nc: [" + ", ".join(["*b"] * (MAX_ALIAS_NODES // 1000 + 1)) + "]\n"
    path.write_text(wide)
    with pytest.raises(RecipeError, match="alias bomb"):
        read_yaml_mapping(path)
    env = tmp_path / "env.yaml"
    env.write_text(BOMB)
    r = cli("run", "quickstart", "--out", str(tmp_path / "o"), "--ray-runtime-env", str(env))
    assert r.returncode == 2 and f"--ray-runtime-env {env}: refused: its aliases" in error_line(r)
    assert not (tmp_path / "o").exists()


def test_a_latin1_recipe_names_its_file(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes("name: caf\u00e9\nsources: []\n".encode("latin-1"))
    r = cli("run", str(path))
    assert r.returncode == 2
    assert error_line(r) == f"error: {path}: not UTF-8 text (byte 0xe9 at offset 9); save it as UTF-8"
