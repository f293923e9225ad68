"""Which device a round trains on, as one ``Accelerator``: ``--device auto|cpu|cuda``.

``auto`` takes a CUDA GPU when there is one, with bf16 autocast where the GPU has it, else the
CPU. Under ``accelerate launch`` the accelerator also carries the process group, so the same
call gives each rank its device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # accelerate loads torch: imported when an accelerator is made, not for --help
    from accelerate import Accelerator

DEVICES = ("auto", "cpu", "cuda")


def make_accelerator(device: str, bf16: bool = True) -> Accelerator:
    import torch
    from accelerate import Accelerator

    if device not in DEVICES:
        raise ValueError(f"device: one of {list(DEVICES)}, got {device!r}")
    cuda = torch.cuda.is_available()
    if device == "cuda" and not cuda:
        raise ValueError("--device cuda, but torch sees no CUDA device here")
    use_cuda = cuda and device in ("auto", "cuda")
    mixed = "bf16" if use_cuda and bf16 and torch.cuda.is_bf16_supported() else "no"
    return Accelerator(cpu=not use_cuda, mixed_precision=mixed)
