"""The oracle stage: rendered dialogues -> simulated oracle ladders (DESIGN.md semantics)."""
