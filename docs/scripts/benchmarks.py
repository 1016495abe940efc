"""The benchmarks page's pictures, drawn at build time:

- `ladder_f1.png`: token-F1 by oracle level, drawn from the table of measured ladders on the page
  itself (docs/benchmarks/index.md, the table whose header starts `| model | recipe |`), so the
  picture and the table cannot disagree;
- `paper_plan.png`: wall time per stage of the paper recipe on 16 cores and one GPU, computed by
  `kame-data plan` from the shipped calibration (`kame-data plan kame_paper --cores 16 --gpus 1
  --no-probe`), so it moves when the calibration or the plan's code does.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks" / "index.md"


def ladder_rows(page: str) -> list[tuple[str, list[float]]]:
    """(label, token-F1 at levels 0-5) per row of the page's ladder table."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| model | recipe |"))
    head = [c.strip() for c in lines[start].strip("|").split("|")]
    col = next(i for i, c in enumerate(head) if c.startswith("token-F1"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        f1 = [float(x) for x in re.findall(r"\d\.\d+|\b1\.0\b", cells[col])[:6]]
        rows.append((f"{cells[0]}, {cells[1]}", f1))
    return rows


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def ladder_plot(page: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, f1 in ladder_rows(page):
        ax.plot(range(len(f1)), f1, marker="o", label=label)
    ax.set_xlabel("oracle level (hint strength)")
    ax.set_ylabel("token-F1 to the true reply")
    ax.set_xticks(range(6))
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    out = _png(fig)
    plt.close(fig)
    return out


def plan_stages(cores: int = 16, gpus: int = 1) -> list[tuple[str, str, float]]:
    """(stage, resource, wall seconds alone on its resource) of the paper recipe's plan."""
    from kame_data.plan.planner import plan_recipe
    from kame_data.plan.projection import Resources, load_calibration
    from kame_data.recipe import load_recipe

    plan = plan_recipe(load_recipe("kame_paper"))
    projection = plan.project(Resources(cores=cores, gpus=gpus), load_calibration())
    return [(s.stage, s.resource, s.wall_s) for s in projection.stages if s.wall_s is not None]


def plan_plot() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = plan_stages()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    labels = [f"{stage} ({resource})" for stage, resource, _ in stages]
    ax.barh(labels[::-1], [w / 3600 for _, _, w in stages][::-1], color="#4a7ab5")
    ax.set_xlabel("hours, each stage alone on its resource")
    ax.set_title("kame_paper on 16 cores + 1 GPU (kame-data plan, shipped calibration)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    out = _png(fig)
    plt.close(fig)
    return out


def plots() -> dict[str, bytes]:
    return {"ladder_f1.png": ladder_plot(PAGE.read_text("utf-8")), "paper_plan.png": plan_plot()}
