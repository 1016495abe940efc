"""mkdocs-gen-files: the generated pages, written at every build from the code, so none can be stale
(docs/scripts/reference.py, docs/scripts/benchmarks.py)."""

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchmarks  # noqa: E402
import reference  # noqa: E402

with mkdocs_gen_files.open("reference/recipe.md", "w") as f:
    f.write(reference.recipe_page())
with mkdocs_gen_files.open("reference/dataset.md", "w") as f:
    f.write(reference.dataset_page())
for name, png in benchmarks.plots().items():
    with mkdocs_gen_files.open(f"benchmarks/{name}", "wb") as f:
        f.write(png)
