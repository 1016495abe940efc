"""The quickstart's rows stay what they were before the pipeline restructuring (issue 13).

Recorded on this project's machine kind with `python -m tests.quickstart_identity OUT`. One
intended change since the record of the old code: speech engines run numpy's BLAS on one thread,
so Whisper's word timings no longer depend on OMP_NUM_THREADS (the old code gave these very
hashes under Ray or with OMP_NUM_THREADS=1, and others without). A second (issue 19): pauses
inside a turn are cut under the oracle's run rule, so audio and timings moved; the texts, voices
and words said did not (the text hashes are unchanged). Float kernels differ between
CPU families (AVX-512 and AMX paths in onnxruntime, CTranslate2, llama.cpp), so whole-row hashes
are compared on the recorded CPU kind; the scripts, voices and words said are compared everywhere.

Re-recorded for issue 15 (spoken scripts): the GSM8K row's assistant turn now says each step's
result ("The notebooks cost twelve dollars. With the pen she spends fourteen dollars.") instead of
reading the sums and repeating the answer; the MMLU-Pro and HSSBench rows are unchanged.
"""

from __future__ import annotations

import json

from tests.conftest import ROOT
from tests.quickstart_identity import cpu_fingerprint, row_hashes

RECORD = ROOT / "tests" / "data" / "quickstart_limit3_row_hashes.json"


def test_quickstart_rows_match_the_record(quickstart_out):
    record = json.loads(RECORD.read_text("utf-8"))
    now = row_hashes(quickstart_out)
    assert now["text"] == record["text"], "scripts, voices or words changed"
    if cpu_fingerprint() == record["cpu"]:
        assert now["rows"] == record["rows"], "row contents changed on the recorded CPU kind"
    else:
        print(f"whole-row hashes not compared: this CPU ({cpu_fingerprint()}) is not the recorded one "
              f"({record['cpu']})")
