"""`kame-data eval`: the paper's spoken MT-Bench evaluation (kame_data/eval/)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kame_data.cli.common import console_logging, fail

app = typer.Typer(
    help=("The paper's spoken MT-Bench evaluation: judge a model's answers with any OpenAI-compatible judge "
          "and report the scores per category, with latency, beside the paper's figures.\n\n"
          "Answer files are FastChat `model_answer` JSONL (one line per question); judgments are FastChat "
          "single-grading JSONL (score -1 for a dropped judgment, with its reason)."),
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
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where runs/ and answers/ go (default: --built)."),
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

    OUT/answers/RUN.jsonl holds what the model said (Whisper) with per-turn latency (first reply
    word minus end of user speech) and whether it took the turn; with an oracle, RUN-backend.jsonl
    holds the back-end's final text per turn. A killed run resumes from its finished questions.

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
    out: Path = typer.Option(Path("judgments.jsonl"), "--out", "-o", help="Where the judgments go (JSONL)."),
    questions: Optional[Path] = QUESTIONS,
    categories: Optional[str] = CATEGORIES,
    all_categories: bool = typer.Option(False, "--all-categories", help="Judge all eight categories."),
    prompts: Optional[Path] = typer.Option(None, "--prompts", help="FastChat's judge_prompts.jsonl, to judge with "
                                           "its exact prompts (default: kame-data's own, same format and rules)."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="LLM cache (default: OUT's folder/judge_cache.sqlite); "
                                         "a rerun asks the judge nothing it already answered."),
    concurrency: int = typer.Option(16, "--concurrency", min=1, help="Judge requests in flight at once."),
) -> None:
    """Grade each answer turn from 1 to 10 with an LLM judge, as MT-Bench's single-answer grading does.

    Temperature 0; the reference answer is shown for math, reasoning and coding; the second turn is
    judged with both turns shown. A judgment without exactly one [[N]] in 1-10, a refusal (HTTP 400)
    or a failure after retries is written with score -1 and its reason, and counted; the run goes on.

    Example:  kame-data eval judge out/eval/answers-*.jsonl --model gpt-4.1 -o out/eval/judgments.jsonl
    """
    from kame_data import atomic
    from kame_data.eval.answers import AnswerFileError, read_answers
    from kame_data.eval.judge import PROMPTS, judge, load_prompts
    from kame_data.llm.cache import CachedBackend, open_cache
    from kame_data.llm.config import BackendConfig, open_backend

    qs = _questions(questions, categories, all_categories)
    try:
        runs = [read_answers(p) for p in answers]
        table = load_prompts(prompts) if prompts else PROMPTS
    except (AnswerFileError, OSError, ValueError) as e:
        fail(str(e))
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
            rows += judge(qs, run, backend, table)
    finally:
        backend.close()
    atomic.write_jsonl(out, rows)
    dropped = [r for r in rows if r["score"] == -1]
    typer.secho(f"judgments: {out.resolve()}", fg=typer.colors.GREEN, bold=True)
    typer.echo(f"  {len(rows) - len(dropped)} scored, {len(dropped)} dropped; {backend.calls} judge calls, "
               f"{backend.cache_hits} from the cache")
    for reason in sorted({r['reason'] for r in dropped}):
        typer.echo(f"  dropped {reason}: {sum(r['reason'] == reason for r in dropped)}")


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
    from kame_data.eval.report import ReportError, collect, read_jsonl, write_report

    qs = _questions(questions, None, True)
    try:
        rows = [r for p in judgments for r in read_jsonl(p)]
        runs_answers = {}
        for p in answers:
            a = read_answers(p)
            if a:
                runs_answers[next(iter(a.values()))["model_id"]] = a
        runs = collect(rows, {q.question_id: q.category for q in qs}, runs_answers)
        files = write_report(runs, out)
    except (ReportError, AnswerFileError, OSError, ValueError, KeyError) as e:
        fail(str(e))
    typer.echo(files["markdown"].read_text("utf-8"))
    typer.secho(f"report: {files['html'].resolve()}", fg=typer.colors.GREEN, bold=True)
    typer.echo(f"  plot: {files['png'].resolve()}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="eval")
