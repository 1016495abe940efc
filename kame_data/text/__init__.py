"""Spoken-text vocabulary shared by every stage: display text to what a voice says, and its words."""
