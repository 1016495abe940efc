"""The speak stage: dialogues -> stereo 24 kHz audio with word timings."""
