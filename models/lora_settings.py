"""A LoRA adapter's shape, stored with every checkpoint that has one.

A module of its own, apart from ``models.loading`` (which applies it, with torch and peft), so
that what only reads the registry, such as a gateway in front of an upstream, loads no ML
framework.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LoraSettings(BaseModel):
    """A LoRA adapter's shape; stored with every checkpoint that has one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    r: int = Field(8, ge=1, le=1024, description="adapter rank")
    alpha: int = Field(16, ge=1, description="scale numerator (scale = alpha / r)")
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout on the adapter's input")
    targets: tuple[str, ...] = Field(
        ("q_proj", "v_proj"), min_length=1, description="module names that get an adapter"
    )
