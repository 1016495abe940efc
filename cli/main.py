"""The `kame-data` command line. Thin: parses, loads a recipe, calls the library, shows progress."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from kame_data.cli import dataset_cmds, doctor_cmd, eval_cmds, model_cmds, review_cmds, speech_cmds
from kame_data.cli.common import console_logging as _console_logging
from kame_data.cli.common import fail as _fail
from kame_data.scrub import scrub

STOPPED_EXIT = 3  # `run` stopped before the end (a service down, an engine crash) and published what it finished

app = typer.Typer(
    name="kame-data",
    help=(
        "Build training data for KAME-style tandem speech-to-speech models.\n\n"
        "A recipe (YAML) names the sources and each stage's config. `kame-data run` pulls the items, "
        "writes spoken-style dialogues, renders them to 24 kHz stereo speech with word timings, "
        "simulates oracle ladders with an LLM and publishes sharded Parquet with a dataset card.\n\n"
        "Start with:  kame-data run quickstart --out out/quickstart"
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _tqdm_factory(quiet: bool):
    from tqdm import tqdm

    positions: dict[str, int] = {}

    def make(name: str, total: int):
        positions.setdefault(name, len(positions))
        return tqdm(total=total, desc=f"{name:>7}", unit="item", position=positions[name], leave=True,
                    disable=quiet, dynamic_ncols=True)

    return make


@app.command()
def run(
    recipe: str = typer.Argument(..., help="Recipe YAML path, or a bundled recipe name such as 'quickstart'."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder (default: out/<recipe name>)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, help="Take at most N source items in all (interleaved across sources)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the shared LLM request cache."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    executor: str = typer.Option("local", "--executor", help="local (this machine) or ray (Ray Data; local "
                                 "cluster, or --ray-address)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Address of an existing Ray cluster."),
    no_resume: bool = typer.Option(False, "--no-resume", help="Ignore the per-item checkpoints of an earlier run "
                                   "in OUT and recompute everything."),
    until: Optional[str] = typer.Option(None, "--until", help="Stop after this step and write its records as "
                                        "JSON lines in OUT (e.g. scripts.jsonl), plus rejects.jsonl: `sources` or "
                                        "any step of the pipeline (`kame-data steps` lists them, in order, with "
                                        "the file each writes)."),
    checkpoints: Optional[str] = typer.Option(None, "--checkpoints", help="Where per-item checkpoints live "
                                              "(default OUT/.checkpoints): a path on a filesystem every node "
                                              "sees, or an object-store URL (s3://bucket/run, gs://…)."),
    llm_cache: Optional[str] = typer.Option(None, "--llm-cache", help="The LLM answer cache: a .sqlite file "
                                            "(one machine), or a shared folder / object-store URL (a cluster)."),
    ray_runtime_env: Optional[Path] = typer.Option(None, "--ray-runtime-env", help="A YAML/JSON file with a Ray "
                                                   "runtime_env (pip, container, env_vars) merged into the one "
                                                   "that ships kame_data to every node."),
    ray_actors: int = typer.Option(1, "--ray-actors", min=1, help="Ray actors per step, spread over the "
                                   "cluster's nodes (about one per node for the speak step)."),
    force: bool = typer.Option(False, "--force", help="OUT holds another recipe's output: delete it (data/, "
                               "manifest, card, rejects, review exclusions; checkpoints stay) and run there."),
) -> None:
    """Run a recipe end to end: sources -> script -> speak -> oracle -> publish.

    Writes OUT/data/*.parquet (audio as a Hugging Face Audio feature), OUT/README.md (dataset
    card), OUT/manifest.json, OUT/rejects.jsonl (every dropped item with a reason code) and
    OUT/run.log. Each stage's result per item is checkpointed in OUT/.checkpoints: after a crash
    or kill, the same command resumes; after a config change only the changed stage and the
    later ones are recomputed. Rows left out with `publish --exclude` stay out.

    One run owns OUT at a time: a second one into it is refused at once, naming the first. OUT
    belongs to its recipe (by name): another recipe into it is refused unless --force.

    With --until, stop early and read the output, e.g. every spoken script of a benchmark in
    seconds, before paying for speech and LLM calls:

        kame-data run recipes/kame_paper.yaml --until script --out out/scripts

    On a Ray cluster, put checkpoints and the LLM cache where every node sees them:

        kame-data run kame_paper --executor ray --ray-address HEAD:6379 --out /shared/paper \\
            --checkpoints s3://bucket/paper/ckpt --llm-cache s3://bucket/llm-cache

    Your own items: a source of `kind: jsonl` reads any JSONL, JSON or Parquet file; `fields:` names
    the field holding each part (question and answer at least; options, category, explanation and
    id too; a dotted name reaches into a nested object). `kame-data plan` warns when a field
    matches no row.

    \b
        sources:
          - {kind: jsonl, name: trivia, path: trivia.jsonl, license: cc-by-4.0,
             fields: {question: q, answer: a, options: choices}}

    Example:  kame-data run recipes/quickstart.yaml --out out/quickstart --limit 2
    """
    from kame_data.dataset.layout import DatasetError
    from kame_data.dataset.owner import refuse_if_busy
    from kame_data.recipe import RecipeError, load_recipe

    try:
        r = load_recipe(recipe)
    except RecipeError as e:
        _fail(str(e))
    out_dir = out or Path("out") / r.name
    try:
        refuse_if_busy(out_dir)  # at once, before the runner's modules load
    except DatasetError as e:
        _fail(str(e), 1)
    from kame_data.runner import RunError, RunStopped, run_recipe
    from kame_data.runner.config import RunConfig

    try:
        config = RunConfig.resolve(r)  # every section parsed once, before OUT is touched
    except RecipeError as e:
        _fail(str(e))
    from kame_data.sources.rows import SourceError
    from kame_data.storage import StorageError

    runtime_env = None
    if ray_runtime_env is not None:
        from kame_data.recipe import read_yaml_mapping

        try:
            runtime_env = read_yaml_mapping(ray_runtime_env, what="a runtime_env (pip, env_vars, …)")
        except RecipeError as e:
            _fail(f"--ray-runtime-env {e}")
    _console_logging()
    t0 = time.perf_counter()
    stopped = None
    try:
        result = run_recipe(config, out_dir, limit=limit, progress=_tqdm_factory(quiet), use_cache=not no_cache,
                            executor=executor, ray_address=ray_address, resume=not no_resume, until=until,
                            checkpoints=checkpoints, llm_cache=llm_cache, ray_runtime_env=runtime_env,
                            ray_actors=ray_actors, force=force)
    except RunStopped as e:  # a service down, an engine crash: what was finished is published all the same
        result, stopped = e.result, e
    except (RunError, SourceError, RecipeError, StorageError, DatasetError) as e:
        _fail(str(e), 1)
    except Exception as e:  # noqa: BLE001 - a bug or an unforeseen failure: one line here, the traceback in run.log
        _fail(f"{type(e).__name__}: {scrub(e)} (the traceback is in {out_dir / 'run.log'})", 1)
    m = result.manifest
    if until:
        typer.secho(f"stopped after {until}: {m['records']} records in {m['path']}", fg=typer.colors.GREEN)
        typer.echo(f"  rejects: {(out_dir / 'rejects.jsonl').resolve()} ({_by_reason(result.rejects)})")
        _allocation_lines(m.get("allocation") or {})
        _stopped_exit(stopped)
        return
    typer.echo("")
    typer.secho(f"dataset: {out_dir.resolve()}", fg=typer.colors.GREEN, bold=True)
    typer.echo(f"  {m['counts']['samples']} dialogues, {len(m['shards'])} shards, "
               f"{m['audio_hours'] * 60:.1f} min of audio, {m['oracle_events']} oracle events "
               f"in {time.perf_counter() - t0:.0f} s")
    typer.echo(f"  card:    {(out_dir / 'README.md').resolve()}")
    typer.echo(f"  rejects: {(out_dir / 'rejects.jsonl').resolve()} ({_by_reason(m['rejects'])})")
    typer.echo(f"  load:    datasets.load_dataset('parquet', data_dir='{(out_dir / 'data').resolve()}')")
    typer.echo("           without torchcodec (a CPU-only machine): .cast_column('audio', Audio(decode=False))")
    _allocation_lines(m.get("allocation") or {})
    if m.get("stopped") and stopped is None:  # the budget: the run did what it was allowed to
        typer.secho(f"stopped: {m['stopped']}; rerun the same command (with a higher oracle.budget_usd) to "
                    "continue", fg=typer.colors.YELLOW)
    _stopped_exit(stopped)


def _by_reason(rejects) -> str:
    """"12: malformed_question 10, too_long 2" (the count, then the reasons), or "0"."""
    from kame_data.records import reasons_line

    n = sum(rejects.values()) if isinstance(rejects, dict) else len(rejects)
    return f"{n}: {reasons_line(rejects)}" if n else "0"


def _allocation_lines(allocation: dict) -> None:
    """Each source's dialogues asked and handed to the script step; a shortfall in yellow, with why."""
    from kame_data.sources.allocate import describe

    for name, a in allocation.items():
        typer.secho(f"  {describe(name, a)}", fg=typer.colors.YELLOW if a["shortfall"] else None)


def _stopped_exit(stopped: Exception | None) -> None:
    """A run that stopped before the end (not for its budget) published what it finished, says why
    and how to resume in one line, and exits 3, so a script can tell it from a finished run."""
    if stopped is not None:
        typer.secho(f"stopped: {scrub(stopped)}", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(STOPPED_EXIT)


@app.command()
def steps() -> None:
    """The pipeline's steps in order: each one's recipe section, what it does, and the file
    `kame-data run --until STEP` writes after it."""
    from kame_data import pipeline
    from kame_data.runner.until import SOURCES_OUTPUT
    from kame_data.sources.step import SourcesStep

    typer.echo(f"  {SourcesStep.name:<10} -> {SOURCES_OUTPUT:<16} the recipe's sources, read, filtered and sampled")
    for spec in pipeline.steps():
        typer.echo(f"  {spec.name:<10} -> {spec.output:<16} {spec.about}")
    typer.echo("  then the writer: sharded Parquet, the card and the manifest")


@app.command()
def status(out: Path = typer.Argument(..., help="An output folder of `kame-data run` (finished or not).")) -> None:
    """How far a run got, per stage: inputs seen, outputs, items computed (vs. read from
    checkpoints), of those retried (their earlier result was transient), and transient results;
    then the rejects, final and transient (a rerun of the same command retries the transient ones).
    A run that says it is running but no longer holds OUT's lock is shown [crashed or killed]."""
    from kame_data.runner.progress import describe_llm, describe_waiting
    from kame_data.runner.status import DEAD, read_status

    try:
        st = read_status(out)
    except FileNotFoundError as e:
        _fail(str(e), 1)
    typer.echo(f"{out}: {st['recipe']} [{st['state']}] ({st['executor']} executor), {st['items']} items")
    if st["state"] == DEAD:
        last = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(st.get("updated", st["started"])))
        typer.echo(f"  the run (pid {st.get('pid', '?')}) ended without finishing; last update {last}: rerun the "
                   "same command to resume (finished items are checkpointed)")
    if st.get("held_by"):
        typer.echo(f"  {out} is in use by {st['held_by']}")
    for name, s in st["stages"].items():
        typer.echo(f"  {name:>7}: {s['inputs']:>6} in  {s['outputs']:>6} out  {s['computed']:>6} computed  "
                   f"{s.get('retried', 0):>4} retried  {s.get('transient', 0):>4} transient  "
                   f"{s.get('checkpoints', 0):>6} checkpoints")
    if st.get("llm"):
        typer.echo(f"  llm: {describe_llm(st['llm'], running=st['state'] == 'running')}")
        for line in describe_waiting(st["llm"], running=st["state"] == "running"):
            typer.echo(f"    {line}")
    transient = st.get("transient", 0)
    typer.echo(f"  samples: {st['samples']}  rejects: {st['rejects'] - transient} final, {transient} transient"
               + (" (rerun the same command to retry them)" if transient else ""))
    if st.get("stopped"):
        typer.echo(f"  stopped: {st['stopped']}")
    if st.get("error"):
        typer.echo(f"  error: {st['error']}")


# The dataset and reviewer commands live beside this module; registered here, in help order.
dataset_cmds.register(app)
review_cmds.register(app)
doctor_cmd.register(app)
speech_cmds.register(app)


@app.command("plan")
def plan_cmd(
    recipe: str = typer.Argument(..., help="Recipe YAML path, or a bundled recipe name such as 'kame_paper'."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    cores: Optional[int] = typer.Option(None, "--cores", min=1, help="CPU cores per node (default: this machine's)."),
    gpus: int = typer.Option(0, "--gpus", min=0, help="GPUs per node."),
    nodes: int = typer.Option(1, "--nodes", min=1, help="Nodes of the cluster."),
    llm_tokens_per_s: Optional[float] = typer.Option(None, "--llm-tokens-per-s", min=0.001, help="Measured "
                                                     "throughput of an openai/vllm backend (all replicas)."),
    usd_per_core_hour: float = typer.Option(0.0, "--usd-per-core-hour", min=0.0),
    usd_per_gpu_hour: float = typer.Option(0.0, "--usd-per-gpu-hour", min=0.0),
    calibration: Optional[Path] = typer.Option(None, "--calibration", help="Rates from benchmarks/calibrate.py "
                                               "(default: the ones shipped, measured on a 2-core machine)."),
    probe: bool = typer.Option(True, "--probe/--no-probe", help="On a CPU other than the calibration's, scale its "
                               "rates by this CPU's measured speed on each kind of work (about 15 s, once per "
                               "CPU; kame_data/plan/speed_probe.py). --no-probe: the calibration's rates as they are."),
    rows: list[str] = typer.Option([], "--rows", metavar="SOURCE=FILE", help="A local copy of a hub source's "
                                   "split (JSONL, JSON or Parquet), to count its dialogues on its own rows; repeat per "
                                   "source."),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="Count each `dialogues` source on its rows "
                                 "where they are here (a local file, or --rows), exactly as the run will: the filters, "
                                 "the draw and the script's verdicts (minutes for a whole benchmark split). "
                                 "--no-measure: the shipped whole-split calibration."),
) -> None:
    """Show what a recipe would produce and cost, without running or downloading anything:
    items and dialogues per source, expected hours of audio, LLM calls and tokens, and the wall
    time per stage on the given resources (from measured per-stage rates) with the stage that
    bounds the run. Rates measured on another CPU are first scaled to this one by a short speed
    probe (about 15 s, once per CPU; --no-probe skips it).

    A source asking for `dialogues` gets a line saying how many the run will make: items drawn
    and past the filters, dialogues kept and any shortfall with its reasons and what would meet
    it. It is counted on the source's own rows where they are here (exact: what `run --until
    script` keeps), else from the shipped calibration of the whole split (its date and command
    in the line).

    A local `kind: jsonl` source's `fields:` mapping is checked against its first rows: a part
    whose field no row has is a warning line (with question or answer, every item would be
    rejected).

    Example:  kame-data plan recipes/kame_paper.yaml --cores 16 --gpus 1
              kame-data plan kame_paper --rows mmlu_pro=mmlu_pro_test.jsonl
    """
    import json
    import os

    from kame_data.plan.planner import format_plan, plan_recipe
    from kame_data.plan.projection import Resources, load_calibration, to_this_cpu
    from kame_data.recipe import RecipeError, load_recipe

    copies = {}
    for given in rows:
        source, sep, file = given.partition("=")
        if not sep or not Path(file).is_file():
            _fail(f"--rows {given!r}: give SOURCE=FILE with an existing local file")
        copies[source] = file
    try:
        plan = plan_recipe(load_recipe(recipe), copies, measure)
        cal = to_this_cpu(load_calibration(calibration), probe, say=lambda m: typer.echo(m, err=True))
    except (RecipeError, OSError, ValueError) as e:
        _fail(str(e))
    plan.project(Resources(cores or os.cpu_count() or 1, gpus, nodes, llm_tokens_per_s, usd_per_core_hour,
                           usd_per_gpu_hour), cal)
    typer.echo(json.dumps(plan.to_dict(), indent=2) if as_json else format_plan(plan))


@app.command("train")
def train_cmd(
    recipe: str = typer.Argument(..., help="Training recipe YAML path, or a bundled name such as 'train_tiny'."),
    dataset: Path = typer.Option(..., "--dataset", "-d", help="A dataset folder written by `kame-data run`."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder (default: out/train/<recipe name>)."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", min=1, help="Train this many optimizer steps instead of the recipe's."),
    restart: bool = typer.Option(False, "--restart", help="Ignore existing checkpoints in OUT and start over."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Fine-tune a Moshi-based tandem model with an oracle stream on a dataset.

    Tokenises the dataset (Mimi codes, SentencePiece text, oracle events) into OUT/tokens in
    kame_finetune's prepare_dataset layout, then trains, writing OUT/metrics.jsonl,
    OUT/checkpoints/ and OUT/model.safetensors. A run whose checkpoints exist resumes exactly
    where it stopped. Needs the train extra (PyTorch and moshi). --dataset may also be a token
    dataset (a folder with tokens.json, e.g. an earlier OUT/tokens): it is streamed as it is.

    Data parallel on G GPUs (or CPU processes) per node, N nodes: the same command under torchrun,
    e.g.  torchrun --nproc_per_node 8 -m kame_data.cli.main train train_kame --dataset DIR

    Example:  kame-data train recipes/train_tiny.yaml --dataset out/quickstart
    """
    try:
        import kame_data.train as kt

        kt.require()
        from kame_data.train.run import train as run_training
    except ImportError as e:
        _fail(str(e) if "kame-data[train]" in str(e) else
              f"training could not load its dependencies ({e}); install them with: pip install 'kame-data[train]' "
              "&& pip install --no-deps moshi==0.2.13", 1)
    _console_logging()
    try:
        result = run_training(recipe, dataset, out, max_steps=max_steps, restart=restart,
                              progress=_tqdm_factory(quiet))
    except kt.TrainError as e:
        _fail(str(e), 1)
    if result.rank:  # under torchrun, rank 0 reports
        return
    typer.echo("")
    typer.secho(f"model: {result.weights.resolve()}", fg=typer.colors.GREEN, bold=True)
    last = result.last
    summary = f"  {result.steps} steps" + (f" (resumed at {result.resumed_from})" if result.resumed_from else "")
    if last:
        summary += f", last loss {last['loss']:.3f} (text {last['text_loss']:.3f}, audio {last['audio_loss']:.3f})"
    if result.eval:
        summary += f", eval loss {result.eval['eval_loss']:.3f}"
    typer.echo(summary + f" in {result.seconds:.0f} s")
    typer.echo(f"  tokens:  {result.tokens.resolve()}")
    typer.echo(f"  metrics: {(result.out / 'metrics.jsonl').resolve()}")


model_cmds.register(app)  # export-checkpoint and infer, after train in the help
eval_cmds.register(app)


def main() -> None:
    """The entry point: an error no command foresaw still ends in one line, not a traceback
    (KAME_DATA_DEBUG=1 shows it)."""
    import os
    import sys

    try:
        app()
    except Exception as e:  # noqa: BLE001
        if os.environ.get("KAME_DATA_DEBUG"):
            raise
        typer.secho(f"error: {type(e).__name__}: {scrub(e)} (set KAME_DATA_DEBUG=1 for the traceback)",
                    fg=typer.colors.RED, err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
