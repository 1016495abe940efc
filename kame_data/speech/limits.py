"""Number types the speech configs share, each with the limits the recipe schema states for it
(kame_data/config_schema.py). Annotations only: the configs' own checks stay in their classes."""

from __future__ import annotations

from typing import Annotated

from kame_data.config_schema import Schema

AtLeastZero = Annotated[float, Schema(minimum=0)]
Positive = Annotated[float, Schema(exclusiveMinimum=0)]
Share = Annotated[float, Schema(minimum=0, maximum=1)]  # a probability or a fraction of a whole
Pair = tuple[float, float]  # [low, high]
Range = tuple[AtLeastZero, AtLeastZero]  # [low, high] seconds
