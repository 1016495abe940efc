"""LLM backends (the simulator for oracle ladders) and the request cache they share."""
