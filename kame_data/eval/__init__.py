"""The paper's spoken MT-Bench evaluation (docs/design.md, "Evaluation"): questions, answer files in
FastChat's `model_answer` format, single-answer judging over any OpenAI-compatible judge, and the
report. Speech and the model's turns come from the existing `run` and `infer` paths."""
