"""The gateway's response ids, which carry the interaction they answered in.

Why: a team that instruments its agent with OpenTelemetry records each answer's ``id`` as
``gen_ai.response.id``, and rarely copies the gateway's ``X-Rtrl-Interaction-Id`` onto its spans.
If the id alone names the interaction, every call of one agent run (each with its own response
id) lands in the run's interaction, where the gateway's rollout is.

The form (``docs/contracts/otlp-v1.md``, "Joining the gateway's rollout")::

    <kind>-<16 lower-case hex digits>.<base64url of the interaction id's UTF-8, no padding>

``kind`` is OpenAI's (``chatcmpl`` for chat, ``cmpl`` for completions); the 64 random bits keep
the calls of one interaction apart (the interaction part keeps interactions apart). A response
id is a rollout's ``turn.call_id``, at most 128 characters, so an interaction id carried is at
most ``MAX_CARRIED_BYTES`` bytes (a UUID takes 36); a longer one, or one the event contract would
refuse, gets OpenAI's plain form ``<kind>-<32 hex digits>``, which names no interaction.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets

KINDS = ("chatcmpl", "cmpl")
MAX_RESPONSE_ID = 128  # a rollout's turn.call_id
RANDOM_HEX = 16
# base64url of 76 bytes is 102 characters, and "chatcmpl-" + 16 + "." + 102 = 128
MAX_CARRIED_BYTES = 76

_CARRYING = re.compile(r"(chatcmpl|cmpl)-[0-9a-f]{16}\.([A-Za-z0-9_-]{2,102})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # what events-v1 refuses in an id


def response_id(interaction_id: str, kind: str) -> str:
    """A new response id of ``kind`` that carries ``interaction_id`` when it can.

    >>> rid = response_id("run-7", "chatcmpl")
    >>> rid[:9], rid[25:], interaction_of(rid)
    ('chatcmpl-', '.cnVuLTc', 'run-7')
    >>> len(response_id("x" * 77, "cmpl")), interaction_of(response_id("x" * 77, "cmpl"))
    (37, None)
    """
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    carried = _carried(interaction_id)
    if carried is None:
        return f"{kind}-{secrets.token_hex(16)}"
    return f"{kind}-{secrets.token_hex(RANDOM_HEX // 2)}.{carried}"


def interaction_of(response_id: str) -> str | None:
    """The interaction id a gateway's response id carries; None for any other string (another
    server's id, the plain form, a padded or non-canonical encoding, an id events-v1 refuses).

    >>> interaction_of("chatcmpl-0123456789abcdef.cnVuLTc")
    'run-7'
    >>> [interaction_of(s) for s in ("chatcmpl-AbCdEf0123", "chatcmpl-0123456789abcdef.cnVuLTc=",
    ...                              "chatcmpl-0123456789ABCDEF.cnVuLTc", "cmpl-" + "0" * 32)]
    [None, None, None, None]
    """
    if not isinstance(response_id, str) or len(response_id) > MAX_RESPONSE_ID:
        return None
    match = _CARRYING.fullmatch(response_id)
    if match is None:
        return None
    encoded = match.group(2)
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        interaction = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if _carried(interaction) != encoded:  # not the one encoding the gateway writes
        return None
    return interaction


def _carried(interaction_id: str) -> str | None:
    """The interaction id as a response id carries it, or None when it cannot be carried."""
    if not interaction_id or _CONTROL.search(interaction_id):
        return None
    try:
        raw = interaction_id.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    if len(raw) > MAX_CARRIED_BYTES:
        return None
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
