"""The quickstart's rows stay what they are recorded as (tests/data/quickstart_limit3_row_hashes.json):
a refactoring must not move a byte of them. A change that means to move them re-records the file
with `python -m tests.quickstart_identity OUT` and says in its commit message what moved and why.

Float kernels differ between CPU families (AVX-512 and AMX paths in onnxruntime, CTranslate2,
llama.cpp), so whole-row hashes are compared on the recorded CPU kind; the scripts, voices and
words said are compared everywhere. Speech engines run numpy's BLAS on one thread, so Whisper's
word timings, and with them the rows, do not depend on OMP_NUM_THREADS or the executor.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tests.quickstart_identity import cpu_fingerprint, row_hashes

RECORD = ROOT / "tests" / "data" / "quickstart_limit3_row_hashes.json"


@pytest.mark.slow
def test_quickstart_rows_match_the_record(quickstart_out):
    record = json.loads(RECORD.read_text("utf-8"))
    now = row_hashes(quickstart_out)
    assert now["text"] == record["text"], "scripts, voices or words changed"
    if cpu_fingerprint() == record["cpu"]:
        assert now["rows"] == record["rows"], "row contents changed on the recorded CPU kind"
    else:
        print(f"whole-row hashes not compared: this CPU ({cpu_fingerprint()}) is not the recorded one "
              f"({record['cpu']})")
