"""Which of the processor's instruction sets llama-server is built for: ggml's own options,
one per set this machine reports, instead of ``-march=native``.

Why: ``-march=native`` (ggml's default, ``GGML_NATIVE``) also compiles ggml's AMX kernels
wherever the processor lists AMX, and a process may not be given AMX's tile state even so (a
sandbox, an older kernel): llama-server then dies of SIGSEGV in ``ggml_backend_amx_mul_mat``
while it loads the model, on every start. AMX is never built; every other set the processor
reports is, so the binary is as fast as native for what we run. A processor that is not x86
(no ``flags`` line of x86's kind) keeps the native build.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

# ggml's option, and the /proc/cpuinfo flags it needs (all of them)
_X86_SETS = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    ("GGML_AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("GGML_AVX512_VBMI", ("avx512vbmi",)),
    ("GGML_AVX512_VNNI", ("avx512_vnni",)),
    ("GGML_AVX512_BF16", ("avx512_bf16",)),
)
_NEVER = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")


def isa_options(cpu_flags: Iterable[str]) -> tuple[str, ...]:
    """CMake options for a processor with ``cpu_flags`` (as /proc/cpuinfo lists them).

    >>> isa_options({"sse4_2", "avx", "avx2", "fma", "f16c", "amx_tile", "amx_int8"})[:7]
    ('-DGGML_NATIVE=OFF', '-DGGML_SSE42=ON', '-DGGML_F16C=ON', '-DGGML_FMA=ON', \
'-DGGML_BMI2=OFF', '-DGGML_AVX=ON', '-DGGML_AVX2=ON')
    >>> isa_options({"sse4_2", "amx_tile"})[-3:]
    ('-DGGML_AMX_TILE=OFF', '-DGGML_AMX_INT8=OFF', '-DGGML_AMX_BF16=OFF')
    >>> isa_options({"fp", "asimd"})  # not x86: ggml's native build
    ()
    """
    have = set(cpu_flags)
    if "sse4_2" not in have:
        return ()
    sets = [
        f"-D{option}={'ON' if have.issuperset(needs) else 'OFF'}" for option, needs in _X86_SETS
    ]
    return ("-DGGML_NATIVE=OFF", *sets, *(f"-D{option}=OFF" for option in _NEVER))


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first processor's flags (x86's ``flags``, ARM's ``Features``); none if unreadable."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()
