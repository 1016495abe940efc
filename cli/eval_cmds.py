"""`kame-data eval`: the paper's spoken MT-Bench evaluation (kame_data/eval/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from kame_data.cli.common import console_logging, fail

app = typer.Typer(
    help=("The paper's spoken MT-Bench evaluation: judge a model's answers with any OpenAI-compatible judge "
          "and report the scores per category, with latency, beside the paper's figures.\n\n"
          "An `eval run` folder is a FastChat bench folder (question.jsonl, model_answer/, reference_answer/); "
          "judgments are FastChat single-grading JSONL, scored as FastChat's llm_judge scores them."),
    no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _categories(categories: Optional[str], all_categories: bool):
    from kame_data.eval.questions import CATEGORIES, PAPER_CATEGORIES

    if all_categories:
        return None
    if not categories:
        return PAPER_CATEGORIES
    chosen = tuple(c.strip() for c in categories.split(",") if c.strip())
    unknown = [c for c in chosen if c not in CATEGORIES]
    if unknown:
        fail(f"--categories: unknown {', '.join(unknown)} (MT-Bench has {', '.join(CATEGORIES)})")
    return chosen


def _questions(path: Optional[Path], categories: Optional[str], all_categories: bool):
    from kame_data.eval.questions import QuestionError, load_questions, shipped_questions

    try:
        return load_questions(path or shipped_questions(), _categories(categories, all_categories))
    except (QuestionError, OSError) as e:
        fail(str(e))


# Options `build` and `judge` share: which questions.
QUESTIONS = typer.Option(None, "--questions", help="A FastChat question.jsonl (default: the 80 MT-Bench questions "
                         "shipped with kame-data).")
CATEGORIES = typer.Option(None, "--categories", help="Comma-separated categories (default: reasoning,stem,humanities, "
                          "as the paper).")


@app.command("build")
def build_cmd(
    out: Path = typer.Option(Path("out/eval"), "--out", "-o", help="Folder for the spoken question set."),
    questions: Optional[Path] = QUESTIONS,
    categories: Optional[str] = CATEGORIES,
    all_categories: bool = typer.Option(False, "--all-categories", help="Keep all eight categories."),
    voices: str = typer.Option("users", "--voices", help="The user voices: a pool or voice name from "
                               "`kame-data voices list` (default: the screened user pool)."),
    max_wer: float = typer.Option(0.05, "--max-wer", min=0.0, max=1.0, help="A turn Whisper hears with more "
                                  "errors is spoken again by the pool's next voice, then by each voice a little slower."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N questions."),
    seed: int = typer.Option(0, "--seed", help="Which voice each question is cast."),
) -> None:
    """Speak the question set with the user voice pool, each turn checked by Whisper (<= --max-wer).

    Writes OUT/eval_questions.jsonl (per turn: text, spoken text, voice, WER, clip length, end of
    speech) and OUT/audio/q{id}-t{turn}.wav. A killed build resumes from its finished questions.

    Example:  kame-data eval build -o out/eval
    """
    from tqdm import tqdm

    from kame_data.eval.build import build
    from kame_data.speech.voices import resolve

    qs = _questions(questions, categories, all_categories)[:limit]
    try:
        pool = resolve(voices, "user")
    except ValueError as e:
        fail(str(e))
    console_logging()
    with tqdm(total=len(qs), desc="  build", unit="question", dynamic_ncols=True) as bar:
        rows = build(qs, out, pool, max_wer=max_wer, seed=seed, progress=bar.update)
    turns = [t for r in rows for t in r["turns"]]
    bad = [t for t in turns if not t["wer_ok"]]
    typer.secho(f"question set: {(out / 'eval_questions.jsonl').resolve()}", fg=typer.colors.GREEN, bold=True)
    typer.echo(f"  {len(rows)} questions, {len(turns)} turns, {sum(t['seconds'] for t in turns) / 60:.1f} min of "
               f"speech; worst WER {max(t['wer'] for t in turns):.1%}; voices "
               f"{', '.join(sorted({t['voice'] for t in turns}))}")
    if bad:
        typer.secho(f"  {len(bad)} turns above {max_wer:.0%} WER on every pool voice (kept, flagged wer_ok: false)",
                    fg=typer.colors.YELLOW)


@app.command("run")
def run_cmd(
    checkpoint: Path = typer.Argument(..., help="A `kame-data train` OUT folder, an exported folder, or a "
                                                "model.safetensors beside its moshi_lm_kwargs.json."),
    built: Path = typer.Option(Path("out/eval"), "--built", "-b", help="The folder `eval build` wrote."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where runs/ and the FastChat bench folder "
                                         "(question.jsonl, model_answer/, reference_answer/) go (default: --built)."),
    oracle: str = typer.Option("none", "--oracle", help="none (the front-end alone, Moshi-like), embedded (the "
                                                        "bundled simulator) or openai (any OpenAI-compatible server)."),
    delay: float = typer.Option(0.0, "--delay", min=0.0, help="Seconds every oracle event arrives late."),
    latency: Optional[str] = typer.Option(None, "--latency", help="Serve the oracle as a KAME server would under an "
                                          "oracle.latency preset (ideal, hosted-fast, hosted-slow, stress)."),
    model: Optional[str] = typer.Option(None, "--model", help="--oracle openai: the simulator's model name."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="--oracle openai: the server's URL."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="--oracle openai: the key's variable."),
    answer_seconds: float = typer.Option(20.0, "--answer-seconds", min=1.0, help="Silence after each question "
                                         "turn for the model to answer in."),
    answer_text: str = typer.Option("whisper", "--answer-text", help="whisper (what the model said, as judged in "
                                    "the paper) or stream (its text stream)."),
    name: str = typer.Option("", "--name", help="The run's id in the answer files (default: checkpoint and oracle)."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or cuda:N."),
    codec: Optional[str] = typer.Option(None, "--codec", help="The Mimi the model was trained with (default: "
                                                              "recorded beside the checkpoint)."),
) -> None:
    """The model answers every built question, turn by turn; answers go out in FastChat's format.

    OUT/model_answer/RUN.jsonl holds what the model said (Whisper) with per-turn latency (first reply
    word minus end of user speech) and whether it took the turn; with an oracle, RUN-backend.jsonl
    holds the back-end's final text per turn. OUT/question.jsonl is the question file of exactly the
    questions answered and OUT/reference_answer/gpt-4.jsonl their reference answers: OUT is a FastChat
    bench folder, so its gen_judgment and show_result run on it unchanged. A killed run resumes from
    its finished questions.

    Example:  kame-data eval run out/train/train_tiny --oracle embedded --delay 0.5
    """
    from tqdm import tqdm

    from kame_data.cli.model_cmds import _latency_arg, _train_module
    from kame_data.eval.build import read_built
    from kame_data.eval.run import EvalRunConfig, run_eval
    from kame_data.llm.config import BackendConfig

    kt = _train_module()
    backend = None
    if oracle == "embedded":
        backend = BackendConfig(kind="llamacpp", max_tokens=48, temperature=0.0)
    elif oracle == "openai":
        if not model:
            fail("--oracle openai needs --model (and --base-url for a server other than OpenAI's)")
        backend = BackendConfig(kind="openai", model=model, base_url=base_url, api_key_env=api_key_env,
                                max_tokens=48, temperature=0.0)
    elif oracle != "none":
        fail(f"--oracle: expected none, embedded or openai, got {oracle!r}")
    cfg = EvalRunConfig(oracle=oracle, delay=delay, latency=_latency_arg(latency), answer_seconds=answer_seconds,
                        answer_text=answer_text, backend=backend, seed=seed, device=device, codec=codec, name=name)
    try:
        total = len(read_built(built))
    except OSError as e:
        fail(str(e))
    console_logging()
    try:
        with tqdm(total=total, desc="    run", unit="question", dynamic_ncols=True) as bar:
            files = run_eval(checkpoint, built, out or built, cfg, progress=bar.update)
    except (kt.TrainError, ValueError, OSError) as e:
        fail(str(e), 1)
    for kind, path in files.items():
        typer.secho(f"{kind}: {path.resolve()}", fg=typer.colors.GREEN, bold=kind == "answers")


@app.command("judge")
def judge_cmd(
    answers: List[Path] = typer.Argument(..., help="Answer files (FastChat model_answer JSONL), one per run."),
    model: str = typer.Option(..., "--model", help="The judge's model name (recorded with every judgment)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="The judge server's URL (default: OpenAI's)."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Environment variable holding the key."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where the judgments go (JSONL; default: "
                                       "model_judgment/JUDGE_single.jsonl beside the answers' model_answer/ folder, "
                                       "FastChat's layout, else ./judgments.jsonl)."),
    questions: Optional[Path] = QUESTIONS,
    categories: Optional[str] = CATEGORIES,
    all_categories: bool = typer.Option(False, "--all-categories", help="Judge all eight categories."),
    prompts: Optional[Path] = typer.Option(None, "--prompts", help="FastChat's judge_prompts.jsonl, to judge with "
                                           "its exact prompts (default: kame-data's own, same format and rules)."),
    reference_answers: Optional[str] = typer.Option(None, "--reference-answers", help="A reference model's answers "
                                                    "in FastChat's answer format, shown to the judge for math, "
                                                    "reasoning and coding (default: FastChat's reference_answer/"
                                                    "gpt-4.jsonl, shipped); 'question-file': the question file's "
                                                    "reference field instead."),
    strict_ratings: bool = typer.Option(False, "--strict-ratings", help="Score -1 a judgment with several ratings, "
                                        "a rating outside 1-10 or in single brackets (FastChat keeps them as it "
                                        "reads them; the report counts them either way)."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="LLM cache (default: OUT's folder/judge_cache.sqlite); "
                                         "a rerun asks the judge nothing it already answered."),
    concurrency: int = typer.Option(16, "--concurrency", min=1, help="Judge requests in flight at once."),
) -> None:
    """Grade each answer turn from 1 to 10 with an LLM judge, as MT-Bench's single-answer grading does.

    As FastChat's llm_judge scores: every answer is judged, an empty or silent one too; temperature
    0; a reference model's answers are shown for math, reasoning and coding (FastChat's gpt-4 ones by
    default); the second turn is judged with both turns shown; the rating is the first [[N]], else
    the first [N], as written. Only a judgment with neither, or a judge call that failed or was
    refused ("$ERROR$"), scores -1. Rows are FastChat's, so its show_result reads them; a sidecar
    (.meta.json) says which reference answers were used.

    Example:  kame-data eval judge out/eval/model_answer/*.jsonl --model gpt-4.1
    """
    from kame_data import atomic
    from kame_data.eval.answers import AnswerFileError, read_answers
    from kame_data.eval.judge import PROMPTS, judge, load_prompts, load_references, reference_for, shipped_references
    from kame_data.eval.report import meta_path
    from kame_data.llm.cache import CachedBackend, open_cache
    from kame_data.llm.config import BackendConfig, open_backend

    qs = _questions(questions, categories, all_categories)
    try:
        runs = [read_answers(p) for p in answers]
        table = load_prompts(prompts) if prompts else PROMPTS
        ref_file = None if reference_answers == "question-file" else Path(reference_answers or shipped_references())
        references = load_references(ref_file) if ref_file is not None else None
    except (AnswerFileError, OSError, ValueError) as e:
        fail(str(e))
    if out is None:
        folders = {p.resolve().parent for p in answers}
        home = next(iter(folders)) if len(folders) == 1 else None
        out = (home.parent / "model_judgment" / f"{model.replace('/', '_')}_single.jsonl"
               if home is not None and home.name == "model_answer" else Path("judgments.jsonl"))
    console_logging()
    backend = CachedBackend(open_backend(BackendConfig(kind="openai", model=model, base_url=base_url,
                                                       api_key_env=api_key_env, concurrency=concurrency)),
                            open_cache(cache or out.parent / "judge_cache.sqlite"))
    rows = []
    try:
        for path, run in zip(answers, runs):
            answered = sum(q.question_id in run for q in qs)
            typer.echo(f"judging {path}: answers to {answered} of the {len(qs)} questions"
                       + ("" if answered == len(qs) else " (only those are judged)"))
            rows += judge(qs, run, backend, table, references=references, strict=strict_ratings)
    finally:
        backend.close()
    used: dict[str, int] = {}
    by_id = {q.question_id: q for q in qs}
    for r in rows:
        if r["judge"][1].startswith("single-math"):
            source = reference_for(by_id[r["question_id"]], references)[1]
            used[source] = used.get(source, 0) + 1
    atomic.write_jsonl(out, rows)
    atomic.write_json(meta_path(out), {"judge": model, "prompts": str(prompts) if prompts else "kame-data",
                                       "strict_ratings": strict_ratings,
                                       "references": {"file": ref_file.name if ref_file else None, "used": used}})
    dropped = [r for r in rows if r["score"] == -1]
    typer.secho(f"judgments: {out.resolve()}", fg=typer.colors.GREEN, bold=True)
    typer.echo(f"  {len(rows) - len(dropped)} scored, {len(dropped)} score -1 (no rating, or the judge failed); "
               f"{backend.calls} judge calls, {backend.cache_hits} from the cache")
    if used:
        typer.echo("  reference answers: " + ", ".join(f"{k} {v}" for k, v in sorted(used.items()))
                   + (f" ({ref_file.name})" if ref_file else " (the question file's reference field)"))


@app.command("report")
def report_cmd(
    judgments: List[Path] = typer.Argument(..., help="Judgment files written by `eval judge` (one judge)."),
    answers: List[Path] = typer.Option([], "--answers", help="The runs' answer files, for the latency columns."),
    out: Path = typer.Option(Path("eval-report"), "--out", "-o", help="Folder for report.md, report.html and "
                                                                     "score_vs_latency.png."),
    questions: Optional[Path] = typer.Option(None, "--questions", help="The question file judged (default: the "
                                                                       "shipped MT-Bench questions)."),
) -> None:
    """A table per category and overall for each run, side by side, with latency (median, p90) and
    how often the model took the turn, the paper's published figures as reference rows, and a plot
    of score against oracle latency. Judgments of different judges are refused.

    Example:  kame-data eval report out/eval/judgments.jsonl --answers out/eval/answers-*.jsonl -o out/eval/report
    """
    from kame_data.eval.answers import AnswerFileError, read_answers
    from kame_data.eval.report import ReportError, collect, meta_path, read_jsonl, references_said, write_report

    qs = _questions(questions, None, True)
    try:
        rows = [r for p in judgments for r in read_jsonl(p)]
        metas = [json.loads(meta_path(p).read_text("utf-8")) for p in judgments if meta_path(p).is_file()]
        runs_answers = {}
        for p in answers:
            a = read_answers(p)
            if a:
                runs_answers[next(iter(a.values()))["model_id"]] = a
        runs = collect(rows, {q.question_id: q.category for q in qs}, runs_answers)
        files = write_report(runs, out, references_said(metas))
    except (ReportError, AnswerFileError, OSError, ValueError, KeyError) as e:
        fail(str(e))
    typer.echo(files["markdown"].read_text("utf-8"))
    typer.secho(f"report: {files['html'].resolve()}", fg=typer.colors.GREEN, bold=True)
    typer.echo(f"  plot: {files['png'].resolve()}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="eval")
