"""The dataset card (README.md): the YAML header the Hugging Face hub and `load_dataset` read,
then what a reader needs to trust the data: sources and licenses, how it was made, statistics,
plots, limitations and citation. Every number comes from the manifest (or the shards it lists),
so the card can never disagree with the data."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from kame_data.atomic import atomic_path, write_text
from kame_data.dataset.folder import DatasetDir
from kame_data.dataset.rows import features
from kame_data.dataset.speech_card import SPEECH_KEYS, speech_sections
from kame_data.records import ASSISTANT, CONTINUATION_GAP, USER
from kame_data.speech.voice import VoiceConfig
from kame_data.speech.voices import role_default

log = logging.getLogger("kame_data.dataset.card")

SOURCE_NAMES = {
    "mmlu_pro": "MMLU-Pro (TIGER-Lab/MMLU-Pro)",
    "gsm8k": "GSM8K (openai/gsm8k)",
    "hssbench": "HSSBench (dozo/HSSBench)",
}
SOURCE_CITATIONS = {
    "mmlu_pro": "Wang et al., *MMLU-Pro: A More Robust and Challenging Multi-Task Language Understanding Benchmark*, 2024.",
    "gsm8k": "Cobbe et al., *Training Verifiers to Solve Math Word Problems*, 2021.",
    "hssbench": "HSSBench (dozo/HSSBench on the Hugging Face hub): cite its authors' paper.",
}
UNKNOWN = "unknown"
ASSETS = "assets"


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"


def _cell(value: Any) -> str:
    """A markdown table cell: pipes and newlines from data must not break the table."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, dict):
        out: list[tuple[str, Any]] = []
        for k, v in obj.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(obj, (list, tuple)):
        return [(prefix, ", ".join(map(str, obj)))]
    return [(prefix, obj)]


def split_summary(manifest: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Rows, shards and bytes per split, in the order the shards list them."""
    out: dict[str, dict[str, int]] = {}
    for s in manifest["shards"]:
        d = out.setdefault(s["split"], {"rows": 0, "shards": 0, "bytes": 0})
        d["rows"] += s["rows"]
        d["shards"] += 1
        d["bytes"] += int(s.get("bytes", 0))
    return out


def source_licenses(manifest: dict[str, Any]) -> dict[str, str]:
    return {s: manifest.get("licenses", {}).get(s) or UNKNOWN for s in sorted(manifest["per_source"])}


def card_header(manifest: dict[str, Any]) -> dict[str, Any]:
    """The YAML metadata block: what the hub indexes and what `load_dataset(folder)` reads."""
    licenses = sorted(set(source_licenses(manifest).values()))
    splits = split_summary(manifest)
    size = sum(d["bytes"] for d in splits.values())
    header: dict[str, Any] = {
        "pretty_name": f"{manifest['recipe_name']} (kame-data)",
        "license": licenses[0] if len(licenses) == 1 else licenses,
        "language": ["en"],
        "task_categories": ["audio-to-audio", "text-generation"],
        "tags": ["speech", "spoken-dialogue", "kame", "moshi", "oracle", "synthetic"],
        "size_categories": [_size_category(manifest["counts"]["samples"])],
        "source_datasets": sorted({f"extended|{spec['hub']}" for spec in manifest["recipe"].get("sources", [])
                                   if spec.get("hub") and spec.get("kind") in manifest["per_source"]}),
        "configs": [{"config_name": "default",
                     "data_files": [{"split": sp, "path": f"data/{sp}-*.parquet"} for sp in splits]}],
        "dataset_info": {
            "features": features()._to_yaml_list(),
            "splits": [{"name": sp, "num_bytes": d["bytes"], "num_examples": d["rows"]} for sp, d in splits.items()],
            "download_size": size,
            "dataset_size": size,
        },
    }
    if not header["source_datasets"]:
        del header["source_datasets"]
    return header


def make_plots(out_dir: Path, manifest: dict[str, Any], stats: dict[str, Any] | None) -> list[tuple[str, str]]:
    """PNG figures under OUT/assets/; returns (caption, relative path) pairs for the card."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    plots: list[tuple[str, str]] = []

    def save(fig, name: str, caption: str) -> None:
        rel = f"{ASSETS}/{name}"
        with atomic_path(Path(out_dir) / rel) as tmp:
            fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
        plots.append((caption, rel))

    levels = manifest.get("levels") or {}
    if levels:
        fig = Figure(figsize=(5, 3))
        ax = fig.subplots()
        keys = sorted(levels, key=int)
        ax.bar([f"L{k}" for k in keys], [levels[k] for k in keys], color="#4c72b0")
        ax.set_xlabel("hint level")
        ax.set_ylabel("oracle events")
        ax.set_title("Oracle events per hint level")
        save(fig, "levels.png", "Oracle events per hint level")
    if stats and stats.get("durations"):
        fig = Figure(figsize=(5, 3))
        ax = fig.subplots()
        names = list(stats["durations"])
        ax.hist([stats["durations"][n] for n in names], bins=20, stacked=True, label=names)
        ax.set_xlabel("dialogue duration (s)")
        ax.set_ylabel("dialogues")
        ax.set_title("Dialogue durations per source")
        ax.legend(fontsize="small")
        save(fig, "durations.png", "Dialogue durations per source")
    return plots


def render_card(manifest: dict[str, Any], stats: dict[str, Any] | None = None,
                plots: list[tuple[str, str]] | None = None) -> str:
    """The README.md text; `stats` (`RowStats.figures()`) and `plots` add per-source hours and figures."""
    sources = sorted(manifest["per_source"])
    licenses = source_licenses(manifest)
    splits = split_summary(manifest)
    recipe = manifest["recipe"]
    speak = recipe.get("speak", {})
    oracle = recipe.get("oracle", {})
    llm = manifest.get("llm") or {}
    per_source_stats = (stats or {}).get("per_source", {})
    per_split_stats = (stats or {}).get("per_split", {})
    lines = [
        "---", yaml.safe_dump(card_header(manifest), sort_keys=False).rstrip(), "---", "",
        f"# {manifest['recipe_name']}: spoken dialogues with simulated oracle streams", "",
        "Training data for KAME-style tandem speech-to-speech models, made by kame-data. Each row is a "
        "two-speaker dialogue rendered to 24 kHz stereo (assistant = speaker A = left channel, user = "
        "speaker B = right channel), its word-level timings, and an oracle ladder: at every "
        f"{oracle.get('interval', 0.5)} s step while the user speaks, what a simulator LLM predicts the assistant "
        "will say, given a hint whose strength (level 0-5) grows with how much of the user's turn has been heard.",
        "",
    ]
    if recipe.get("description"):
        lines += [f"Recipe description: {recipe['description']}", ""]
    lines += ["## Sources", "", "| source | dataset | dialogues | items | license |", "|---|---|---|---|---|"]
    for s in sources:
        lic = licenses[s]
        items = per_source_stats.get(s, {}).get("items", "")
        shown = "**none stated**" if lic == UNKNOWN else lic
        lines.append(f"| {_cell(s)} | {_cell(_origin(recipe, s))} | {manifest['per_source'][s]} | {items} | {_cell(shown)} |")
    lines += _allocation_rows(manifest)
    unlicensed = [s for s in sources if licenses[s] == UNKNOWN]
    if unlicensed:
        lines += ["", f"> **Warning:** {', '.join(unlicensed)} has no stated license; rows derived from it must not "
                      "be redistributed without the authors' permission."]
    lines += [
        "", "## How it was generated", "",
        f"- Recipe `{manifest['recipe_name']}` (config hash `{manifest['config_hash']}`), seed {recipe.get('seed', 0)}"
        + (f", kame-data commit `{manifest['git_commit']}`" if manifest.get("git_commit") else "") + ".",
        f"- Script: {recipe.get('script', {}).get('style', 'template')} style, "
        f"{recipe.get('script', {}).get('variants', 1)} spoken variant(s) per item.",
        f"- Voices: assistant (A) {_voice(speak.get('assistant'), role_default(ASSISTANT))}; "
        f"user (B) {_voice(speak.get('user'), role_default(USER))}.",
        f"- Pauses inside a turn: {_pauses(speak.get('pauses'), oracle)}",
        f"- Oracle simulator: {llm.get('backend', '?')} / {llm.get('model', '?')}"
        + (f" (model licence: {_cell(llm['model_license'])})" if llm.get("model_license") else "")
        + (f", prompts v{_cell(llm['prompt_version'])}" if llm.get("prompt_version") else "") + ", interval "
        f"{oracle.get('interval', 0.5)} s, target {oracle.get('target', 'assistant')}"
        + (f", {llm['calls']} calls and {llm.get('cache_hits', 0)} cache hits" if llm.get("calls") is not None else "")
        + ".",
        "- Splits assigned by a hash of the item id and the seed, so all variants of an item share a split: "
        + ", ".join(f"{sp} {frac:g}" for sp, frac in (recipe.get("publish", {}).get("splits") or
                                                       {recipe.get("publish", {}).get("split", "train"): 1}).items())
        + ".",
        f"- Software: kame-data {manifest['versions'].get('kame-data', '?')}, "
        + ", ".join(f"{k} {v}" for k, v in manifest["versions"].items() if k != "kame-data") + ".",
    ]
    if manifest.get("stopped"):
        lines.append(f"- The run stopped early ({_cell(manifest['stopped'])}); the data is what was finished.")
    lines += [
        "", "## Statistics", "",
        "| what | value |", "|---|---|",
        f"| dialogues | {manifest['counts']['samples']} |",
        f"| audio hours | {manifest['audio_hours']} |",
        f"| oracle events | {manifest['oracle_events']} |",
    ]
    if "early_truth_events" in manifest:
        lines.append(f"| level-5 events inside a user turn (the true reply before the user has finished) | "
                     f"{manifest['early_truth_events']} |")
    for s in sources:
        hours = per_source_stats.get(s, {}).get("hours")
        lines.append(f"| dialogues from {_cell(s)} | {manifest['per_source'][s]}"
                     + (f" ({hours} h)" if hours is not None else "") + " |")
    f1 = manifest.get("oracle_f1_by_level") or {}
    rouge = manifest.get("oracle_rouge_l_by_level") or {}
    for level, n in (manifest.get("levels") or {}).items():
        lines.append(f"| events at level {level} | {n}"
                     + (f" (mean token-F1 to the true reply {f1[level]:.2f}" if level in f1 else "")
                     + (f", ROUGE-L {rouge[level]:.2f}" if level in f1 and level in rouge else "")
                     + (")" if level in f1 else "") + " |")
    for s, sim in (manifest.get("oracle_similarity_by_source") or {}).items():
        lines.append(f"| oracle predictions on {_cell(s)}, levels 0-4 | token-F1 {sim['token_f1']:.2f}, "
                     f"ROUGE-L {sim['rouge_l']:.2f} ({sim['events']} events) |")
    lines += _arrival_rows(manifest.get("oracle_arrival"), oracle.get("latency"))
    for reason, n in manifest["rejects"].items():
        lines.append(f"| rejected: {_cell(reason)} | {n} |")
    lines += ["", "| split | dialogues | items | shards | bytes |", "|---|---|---|---|---|"]
    for sp, d in splits.items():
        lines.append(f"| {sp} | {d['rows']} | {per_split_stats.get(sp, {}).get('items', '')} | {d['shards']} | {d['bytes']} |")
    quality = manifest.get("quality")
    if isinstance(quality, dict) and quality:
        lines += ["", "### Quality", "", "| measure | value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |"
                  for k, v in _flatten({k: v for k, v in quality.items() if k not in SPEECH_KEYS})]
        lines += speech_sections(manifest)
    timings = manifest.get("timings") or {}
    if timings:
        lines += ["", "### Run time (seconds)", "", "| stage | seconds |", "|---|---|"]
        lines += [f"| {_cell(k)} | {v} |" for k, v in timings.items()]
    for caption, rel in plots or []:
        lines += ["", f"![{caption}]({rel})"]
    lines += [
        "", "## Loading", "", "```python", "from datasets import load_dataset, Audio",
        "ds = load_dataset(\"<this folder or repo id>\")          # every split",
        "ds = load_dataset(\"<this folder or repo id>\", split=\"train\", streaming=True)",
        "raw = ds.cast_column(\"audio\", Audio(decode=False))  # WAV bytes without torch",
        "```", "",
        "Decoding the audio column needs `torchcodec` (with a torch it runs on); where it is missing, as on a "
        "CPU-only machine with the CPU torch wheel, `ds[0]` raises an ImportError: cast the column with "
        "`Audio(decode=False)` and read the WAV bytes with `soundfile`.", "",
        "Exports for the trainers: `kame-data export kame-finetune OUT DEST` (audio/, text/, oracle_raw/) and "
        "`kame-data export moshi-finetune OUT DEST` (stereo WAVs with word alignments and a JSONL index).", "",
        "## Limitations", "",
        "- Speech is synthetic (TTS); voices, prosody and turn-taking are simpler than real conversation.",
        "- Oracle predictions come from a simulator model and can be wrong or off-topic, especially at low levels.",
        "- Benchmark questions are read aloud; some lose meaning without their written form "
        "(items that need an image are rejected, but not every such item is caught).",
        "- Word timings come from the TTS engines, not from a human annotation.",
        "- Licenses are those of the sources; check each before redistributing.", "",
        "## Citation", "",
        "If you use this data, cite the KAME paper (Sakana AI, *KAME: Tandem Architecture for Enhancing "
        "Knowledge in Real-Time Speech-to-Speech Conversational AI*) and the sources it was built from:", "",
    ]
    lines += [f"- {SOURCE_CITATIONS[s]}" for s in sources if s in SOURCE_CITATIONS]
    lines += [
        "", "```bibtex",
        f"@misc{{kame_data_{_bib_key(manifest['recipe_name'])},",
        f"  title = {{{manifest['recipe_name']}: spoken dialogues with simulated oracle streams}},",
        f"  note = {{Generated with kame-data {manifest['versions'].get('kame-data', '')}, "
        f"config hash {manifest['config_hash']}}}",
        "}", "```", "",
    ]
    return "\n".join(lines)


def _allocation_rows(manifest: dict[str, Any]) -> list[str]:
    """Per source asking for `dialogues`: asked, items past the filters and drawn, handed to the
    script step, published, and why any shortfall (kame_data/sources/allocate.py)."""
    allocation = manifest.get("allocation") or {}
    if not allocation:
        return []
    lines = ["", "### Dialogues asked and made", "",
             "| source | asked | items passed / drawn | scripted | published | short | why |", "|---|---|---|---|---|---|---|"]
    for name, a in allocation.items():
        published = manifest["per_source"].get(name, 0)
        why = dict(a["reasons"])
        if published < a["dialogues"]:
            why["lost in later steps (rejects below)"] = a["dialogues"] - published
        short = max(0, a["asked"] - published)
        why_text = ", ".join(f"{_cell(k)} {v:,}" for k, v in why.items()) if short else ""
        lines.append(f"| {_cell(name)} | {a['asked']:,} | {a.get('passed', a['items']):,} / {a['items']:,} | "
                     f"{a['dialogues']:,} | {published:,} | {short:,} | {why_text} |")
    return lines


def _origin(recipe: dict[str, Any], kind: str) -> str:
    """Where a source's rows came from: a hub dataset, or a local file in that source's format."""
    where = []
    for spec in recipe.get("sources", []):
        if spec.get("kind") == kind:
            where.append(f"`{spec['hub']}` (hub)" if spec.get("hub") else f"local file `{Path(spec.get('path', '?')).name}`")
    name = SOURCE_NAMES.get(kind, kind)
    return f"{name}: " + ", ".join(where) if where else name


def _voice(cfg: dict[str, Any] | list | str | None, default: VoiceConfig | str) -> str:
    """A recipe's voice or pool in words; `default`: the role's voice (or pool name) when the recipe
    gives none."""
    if isinstance(cfg, list):  # a voice pool: each dialogue draws one
        return "a pool of " + "; ".join(_voice(c, default) for c in cfg)
    if isinstance(cfg, str) or (not cfg and isinstance(default, str)):  # a catalogue voice or pool by name
        return f"`{cfg or default}`"
    if isinstance(default, str):
        default = VoiceConfig()  # a mapping's engine and voice when it leaves them out
    cfg = cfg or {"engine": default.engine, "voice": default.voice}
    if cfg.get("name"):  # a catalogue voice: its name says it (the Voices table has the rest)
        return f"`{cfg['name']}`"
    extra = ", ".join(f"{k} {v}" for k, v in cfg.items() if k not in ("engine", "voice"))
    return f"{cfg.get('engine', default.engine)} `{cfg.get('voice', default.voice)}`" + (f" ({extra})" if extra else "")


def _pauses(cfg: dict[str, Any] | None, oracle: dict[str, Any]) -> str:
    """How pauses inside turns were made, and what the oracle ladder does with them."""
    cfg = cfg or {}
    if not cfg:
        said = "as the voices made them"
    elif not cfg.get("bound", True):
        said = f"as the voices made them, even past the oracle's {CONTINUATION_GAP:g} s run rule"
    else:
        said = (f"kept under the oracle's {CONTINUATION_GAP:g} s run rule (a pause that would reach it is "
                f"redrawn: after a sentence {_range(cfg.get('sentence'))} s, after a clause "
                f"{_range(cfg.get('clause'))} s, capped by the next word's length)")
    if cfg.get("thinking"):
        said += (f"; a user turn has a thinking pause of {_range(cfg.get('thinking_seconds'))} s with probability "
                 f"{cfg['thinking']:g}")
    if oracle.get("early_truth") == "keep":
        said += (f"; where a pause reaches {CONTINUATION_GAP:g} s the ladder ends the user's run there (level 5, "
                 "the true reply) and falls back to a lower level when the user goes on: such events are kept "
                 "and counted below")
    return said + "."


def _range(value: Any) -> str:
    return "-".join(f"{v:g}" for v in value) if isinstance(value, (list, tuple)) else str(value)


def _bib_key(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def write_card(out_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """Write OUT/assets/*.png and OUT/README.md; statistics read from the shards where they exist."""
    out_dir = Path(out_dir)
    try:
        stats = DatasetDir(out_dir, manifest).statistics(events=False).figures()
    except (OSError, ValueError) as e:  # shards unreadable: card from the manifest alone
        log.warning("card statistics from the manifest only: %s", e)
        stats = None
    plots = make_plots(out_dir, manifest, stats)
    path = out_dir / "README.md"
    write_text(path, render_card(manifest, stats, plots))
    return path


def _arrival_rows(arrival: dict[str, Any] | None, latency: Any) -> list[str]:
    """The statistics rows of oracle arrival (docs/design.md, "Oracle arrival"): the model, the delay
    it gave against the delay its distributions expect, and what the served stream lost."""
    if not arrival:
        return []
    from kame_data.oracle.latency import parse_latency

    try:
        model = parse_latency(latency)
    except ValueError:
        model = None
    d, pc = arrival["delay_s"], arrival["pieces"]
    return [
        f"| oracle arrival model | {_cell(model.name) if model else '?'}"
        + (f" (expected delay {model.expected_delay_s():.3g} s)" if model else "") + " |",
        f"| oracle delay, ladder time to first chunk (s) | median {d['median']}, p95 {d['p95']}, "
        f"min {d['min']}, max {d['max']} |",
        f"| oracle events asked by the server / played | {arrival['sent']} of {arrival['events']} / "
        f"{arrival['played']} |",
        f"| reply pieces read / late (never read) / cut by the next reply | {pc['read']} / {pc['late']} / "
        f"{pc['cut']} ({arrival['late_share']:.1%} late) |",
    ]
