"""What CPU this is, in the terms that move measured rates and float results: its model name, and the
instruction sets that change the kernels of onnxruntime, CTranslate2 and llama.cpp. A calibration
records it (benchmarks/calibrate.py) so `kame-data plan` can say when its rates come from another CPU;
the quickstart's row hashes record the fingerprint (tests/quickstart_identity.py)."""

from __future__ import annotations

from pathlib import Path

CPU_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8")


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def _field(lines: list[str], name: str) -> str:
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.split(":", 1)[0].strip() == name), "")


def cpu_fingerprint() -> str:
    """'GenuineIntel:avx2,fma,…': the vendor and the instruction sets of CPU_FLAGS it has ('unknown'
    where /proc/cpuinfo cannot be read)."""
    lines = _cpuinfo()
    if not lines:
        return "unknown"
    flags = set(_field(lines, "flags").split())
    return _field(lines, "vendor_id") + ":" + ",".join(f for f in CPU_FLAGS if f in flags)


def cpu_description() -> str:
    """The model name and the fingerprint, for a person to read ('Intel(R) Xeon(R) … (GenuineIntel:avx2,…)')."""
    name = _field(_cpuinfo(), "model name")
    return f"{name} ({cpu_fingerprint()})" if name else cpu_fingerprint()
