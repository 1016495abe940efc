"""The bundled trainer: tokenise a kame-data dataset and fine-tune a Moshi-based tandem model on it.

Optional: it needs the `train` extra (PyTorch, SentencePiece) and `moshi` (installed with --no-deps,
see the Makefile). This module imports none of them, so `import kame_data.train` always works and
`require()` names what is missing; the submodules that need torch import it themselves.

- `streams`: text, oracle-event and oracle-frame streams (numpy only).
- `tokenize`: dataset -> token Parquet in kame_finetune's `prepare_dataset` layout (Mimi + SentencePiece).
- `model`: Moshi's `LMModel` with an oracle embedding added to the text embedding.
- `data`, `loop`: windows and batches with the reference oracle augmentations; the training loop.
- `config`: the training recipe (`recipes/train_tiny.yaml`).
- `weights`: checkpoints in the layouts KAME, moshi and kame_finetune load (`export-checkpoint`).
- `infer`: a trained model answers a dialogue's user channel, the oracle stream fed as in training.
"""

from __future__ import annotations

import importlib.util

INSTALL_HINT = "pip install 'kame-data[train]' && pip install --no-deps moshi==0.2.13"


class TrainError(RuntimeError):
    """Training cannot start or go on; the message says why and what to change."""


class TrainDependencyError(ImportError):
    """PyTorch, moshi or sentencepiece is missing."""


def missing_dependencies() -> list[str]:
    """Top-level modules the trainer needs that cannot be imported here."""
    return [m for m in ("torch", "moshi", "sentencepiece", "einops", "safetensors")
            if importlib.util.find_spec(m) is None]


def require() -> None:
    """Raise `TrainDependencyError` naming the missing modules and the install command."""
    missing = missing_dependencies()
    if missing:
        raise TrainDependencyError(
            f"training needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed. "
            f"Install the train extra with: {INSTALL_HINT}  (moshi 0.2.13 pins torch<2.10 and "
            "huggingface-hub<1.0, which conflict with this package's datasets; its training code runs "
            "without those pins, so it is installed without its dependencies)")


def train(*args, **kwargs):
    """`kame_data.train.run.train` (imported lazily)."""
    require()
    from kame_data.train.run import train as _train

    return _train(*args, **kwargs)
