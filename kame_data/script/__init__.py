"""The script stage: source items -> spoken-style dialogues (display text and spoken text)."""
