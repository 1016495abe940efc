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

from kame_data.train.errors import (INSTALL_HINT, TrainDependencyError, TrainError, missing_dependencies,
                                    require)

__all__ = ["INSTALL_HINT", "TrainDependencyError", "TrainError", "missing_dependencies", "require", "train"]


def train(*args, **kwargs):
    """`kame_data.train.run.train` (imported lazily)."""
    require()
    from kame_data.train.run import train as _train

    return _train(*args, **kwargs)
