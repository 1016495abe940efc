"""The dataset card (README.md) with the YAML header the Hugging Face hub and `load_dataset` read."""

from __future__ import annotations

from typing import Any

import yaml

from kame_data.io.dataset import features

SOURCE_NAMES = {
    "mmlu_pro": "MMLU-Pro (TIGER-Lab/MMLU-Pro)",
    "gsm8k": "GSM8K (openai/gsm8k)",
    "hssbench": "HSSBench (dozo/HSSBench)",
}


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"


def render_card(manifest: dict[str, Any]) -> str:
    sources = sorted(manifest["per_source"])
    source_licenses = {s: manifest.get("licenses", {}).get(s, "unknown") for s in sources}
    licenses = sorted({"other" if v == "unknown" else v for v in source_licenses.values()})
    splits = sorted({s["split"] for s in manifest["shards"]})
    header = {
        "license": licenses[0] if len(licenses) == 1 else "other",
        "language": ["en"],
        "task_categories": ["audio-to-audio", "text-generation"],
        "tags": ["speech", "spoken-dialogue", "kame", "moshi", "oracle", "synthetic"],
        "size_categories": [_size_category(manifest["counts"]["samples"])],
        "configs": [{"config_name": "default",
                     "data_files": [{"split": sp, "path": f"data/{sp}-*.parquet"} for sp in splits]}],
        "dataset_info": {
            "features": features()._to_yaml_list(),
            "splits": [{"name": sp, "num_examples": sum(s["rows"] for s in manifest["shards"] if s["split"] == sp)}
                       for sp in splits],
        },
    }
    recipe = manifest["recipe"]
    speak = recipe.get("speak", {})
    oracle = recipe.get("oracle", {})
    lines = [
        "---", yaml.safe_dump(header, sort_keys=False).rstrip(), "---", "",
        f"# {manifest['recipe_name']}: spoken dialogues with simulated oracle streams", "",
        "Training data for KAME-style tandem speech-to-speech models, made by kame-data. Each row is a "
        "two-speaker dialogue rendered to 24 kHz stereo (assistant = speaker A = left channel, user = "
        "speaker B = right channel), its word-level timings, and an oracle ladder: at every 0.5 s step "
        "while the user speaks, what a simulator LLM predicts the assistant will say, given a hint whose "
        "strength (level 0-5) grows with how much of the user's turn has been heard.", "",
        "## Sources", "",
    ]
    for s in sources:
        lic = source_licenses[s]
        note = "NO LICENSE STATED" if lic == "unknown" else f"license: {lic}"
        lines.append(f"- **{s}**: {SOURCE_NAMES.get(s, s)}, {manifest['per_source'][s]} dialogues, {note}.")
    unlicensed = [s for s in sources if source_licenses[s] == "unknown"]
    if unlicensed:
        lines += ["", f"> **Warning:** {', '.join(unlicensed)} has no stated license; rows derived from it must not "
                      "be redistributed without the authors' permission."]
    levels = manifest.get("levels", {})
    lines += [
        "", "## How it was generated", "",
        f"- Recipe `{manifest['recipe_name']}` (config hash `{manifest['config_hash']}`), seed {recipe.get('seed', 0)}.",
        f"- Voices: assistant {speak.get('assistant', {'engine': 'piper', 'voice': 'joe'})}, "
        f"user {speak.get('user', {'engine': 'espeak', 'voice': 'en-us+f3'})}.",
        f"- Oracle simulator: {manifest.get('llm', {}).get('backend', '?')} / {manifest.get('llm', {}).get('model', '?')}, "
        f"interval {oracle.get('interval', 0.5)} s, target {oracle.get('target', 'assistant')}.",
        f"- kame-data {manifest['versions'].get('kame-data', '?')}.",
        "", "## Statistics", "",
        "| what | value |", "|---|---|",
        f"| dialogues | {manifest['counts']['samples']} |",
        f"| audio hours | {manifest['audio_hours']} |",
        f"| oracle events | {manifest['oracle_events']} |",
    ]
    for level, n in levels.items():
        lines.append(f"| events at level {level} | {n} |")
    for reason, n in manifest["rejects"].items():
        lines.append(f"| rejected: {reason} | {n} |")
    lines += [
        "", "## Loading", "", "```python", "from datasets import load_dataset",
        "ds = load_dataset(\"parquet\", data_dir=\"data\")  # or load_dataset(\"<this folder or repo>\")", "```", "",
        "## Limitations", "",
        "- Speech is synthetic (TTS); voices, prosody and turn-taking are simpler than real conversation.",
        "- Oracle predictions come from a small simulator model and can be wrong or off-topic, especially at low levels.",
        "- Benchmark questions are read aloud; some lose meaning without their written form.", "",
        "## Citation", "",
        "If you use this data, cite the KAME paper and the source benchmarks listed above.", "",
    ]
    return "\n".join(lines)
