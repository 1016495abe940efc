"""Doctor probes that fail on purpose, run by tests/test_doctor.py in the doctor's subprocess."""

import ctypes


def segfault(opts: dict) -> str:
    ctypes.string_at(0)  # a real native crash: reading address 0 raises SIGSEGV
    return "unreachable"


def raise_error(opts: dict) -> str:
    raise ValueError("planted failure")
