"""What a recipe will cost before it runs (`kame-data plan`): `planner.py` sizes each source (items,
dialogues kept, audio, LLM calls and tokens), `yields.py` counts dialogues the way the run counts them
(the sources' filters and the script's verdicts, measured on local rows or from the shipped calibration),
`projection.py` turns the sizes into wall time per stage from the calibrated rates
(`kame_data/calibration.json`), and `speed_probe.py` carries those rates to another CPU.

Nothing below this package imports it: the runner and the steps never plan. The CPU accounting the
calibration reads (`kame_data/costs.py`) stays below, at the root, since the steps themselves record it.
"""
