"""The oracle stage: rendered dialogues -> simulated oracle ladders (docs/design.md semantics)."""
