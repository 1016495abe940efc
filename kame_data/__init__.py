"""kame-data: spoken, oracle-augmented training data for KAME-style tandem speech models."""

__version__ = "0.1.0"
