"""The runner: streams items through the stages and owns everything around them."""

from kame_data.runner.run import RunError, RunResult, RunStopped, run_recipe

__all__ = ["RunError", "RunResult", "RunStopped", "run_recipe"]
