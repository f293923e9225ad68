"""Which arm and checkpoint serve a request, as the checkpoints topic moves: the fixed split of
``--experiment/--arms`` or ``--canary``, or the canary that the topic announces.

A checkpoint announced as a ``canary`` of the checkpoint this gateway serves starts its
experiment (``serving.routing.canary``: the announced share of users on the candidate,
the rest on the followed checkpoint): the candidate is loaded first, beside the served one, and
only then does any user land on it. The canary ends when the same checkpoint is announced again
as promoted (rolled out: the gateway moves to it) or rejected (rolled back), or when the gateway
moves to a checkpoint that is not the canary's parent. A fixed split is never replaced.

An organisation's line (``checkpoints.lines``): a promoted checkpoint announced with an
``org_id`` is loaded beside the followed one and serves that organisation's requests (outside
any canary of the shared line; a fixed split still applies to everyone); one announced as a
``canary`` splits that organisation's users alone, against what serves it now, until its
outcome is announced. A line serves while it grows on the
checkpoint the gateway follows. When the followed checkpoint moves, every line grown on the old
one stops serving at once and its organisation falls back to the shared checkpoint. A request
whose ``model`` names another organisation's checkpoint is refused (403,
``foreign_checkpoint``).

Assigning a request and resolving its checkpoint happen under one lock with those changes, so
no request is assigned an arm whose checkpoint was unloaded in between: each request is served
wholly by the checkpoint it was admitted with.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from checkpoints.record import CANARY, PROMOTED, CheckpointInfo
from models.rollout import Experiment
from serving.answers import ApiError
from serving.follower import moves_forward
from serving.routing import CURRENT, Split, canary

if TYPE_CHECKING:
    from serving.backends.base import Backend

log = logging.getLogger(__name__)


def assignment_unit(
    user_header: str | None, body_user: str | None, authorization: str | None
) -> str:
    """Whom a request is assigned as: the same person must land in the same arm on every call.

    ``X-Rtrl-User-Id`` when the caller sends it; else the request's ``user`` (OpenAI's end-user
    identifier, which clients built on the official SDKs already send); else the API key, as
    ``key:`` and a hash of it: everyone behind one key shares an arm. Never the interaction id,
    which assigned one person's every request afresh and put them in both arms (counted in
    both by the A/B and the canary). A key shared by many people makes its traffic one
    cluster: coarser, never split. The gateway scopes the unit by the API key's organisation
    (``infra.tenancy.scoped_key``): two organisations' same user id are two people.

    >>> assignment_unit("u1", "other", "Bearer k")
    'u1'
    >>> assignment_unit(None, "end-user-7", "Bearer k")
    'end-user-7'
    >>> assignment_unit(None, None, "Bearer k") == assignment_unit("", "", "Bearer k")
    True
    >>> assignment_unit(None, None, "Bearer k").startswith("key:")
    True
    """
    if user_header:
        return user_header
    if body_user:
        return body_user
    digest = hashlib.sha256((authorization or "").encode()).hexdigest()[:24]
    return f"key:{digest}"


class Assignment:
    def __init__(self, backend: Backend, fixed: Split | None = None,
                 fixed_org: str | None = None) -> None:  # fmt: skip
        self._backend = backend
        self._fixed = fixed
        self._fixed_org = fixed_org  # the one organisation the fixed split applies to, if any
        self._canary: Split | None = None
        self._canary_of: tuple[str, str] | None = None  # (candidate, its parent)
        self._lines: dict[str, CheckpointInfo] = {}  # organisation -> its served checkpoint
        # organisation -> its canary: the split of its own users, the candidate, its parent
        self._org_canaries: dict[str, tuple[Split, str, str]] = {}
        self._owners: dict[str, str] = {}  # every organisation checkpoint announced -> its org
        self._lock = threading.Lock()

    @property
    def split(self) -> Split | None:
        with self._lock:
            return self._fixed or self._canary

    def admit(self, user_key: str, model: str,
              org_id: str | None = None) -> tuple[Experiment | None, Any]:  # fmt: skip
        """The request's arm (None outside an experiment) and what serves it: ``org_id``'s own
        line where it has one (a foreign ``model`` was refused before: :meth:`refuse_foreign`)."""
        with self._lock:
            line = self._lines.get(org_id) if org_id is not None else None
            own = self._org_canaries.get(org_id) if org_id is not None else None
            fixed = self._fixed if self._fixed_org in (None, org_id) else None
            if fixed is None and own is not None:  # its canary, on its own users only
                arm = own[0].assign(user_key)
                return Experiment(own[0].experiment, arm.name), self._backend.target(
                    arm.checkpoint, model
                )
            if fixed is None and line is not None:
                return None, self._backend.target(line.checkpoint_id, model)
            split = fixed or (self._canary if self._fixed is None else None)
            if split is None:
                return None, self._backend.target(CURRENT, model)
            arm = split.assign(user_key)
            return Experiment(split.experiment, arm.name), self._backend.target(
                arm.checkpoint, model
            )

    def refuse_foreign(self, model: str, org_id: str | None) -> None:
        """A 403 (``foreign_checkpoint``) when ``model`` names another organisation's
        checkpoint, served now or not (a rejected or superseded one included)."""
        with self._lock:
            owner = self._owners.get(model)
        if owner is not None and owner != org_id:
            raise ApiError(403, f"The model `{model}` belongs to another organisation",
                           "invalid_request_error", "foreign_checkpoint", "model")  # fmt: skip

    def foreign(self, org_id: str | None) -> set[str]:
        """The checkpoints of organisations other than ``org_id`` (never listed to it)."""
        with self._lock:
            return {c for c, owner in self._owners.items() if owner != org_id}

    def on_announcement(self, info: CheckpointInfo) -> None:
        """The follower's callback for every announcement of the checkpoints topic."""
        if info.org_id is not None:
            self._take_up_line(info)
            return
        if info.status == CANARY:
            self._start(info)
            return
        if self._backend.take_up(info):
            self._drop_stale_lines()
        with self._lock:
            if self._canary_of is None:
                return
            candidate, parent = self._canary_of
            ended = info.checkpoint_id == candidate or self._backend.current_id != parent
            if not ended:
                return
            self._canary, self._canary_of = None, None
            self._backend.unpin(candidate)
        outcome = info.status if info.checkpoint_id == candidate else "superseded"
        log.info("serving: canary %s ended (%s)", candidate, outcome)

    def _start(self, info: CheckpointInfo) -> None:
        if self._fixed is not None:
            log.info("serving: canary %s not started: a fixed split is set", info.checkpoint_id)
            return
        if info.parent != self._backend.current_id:
            return  # a canary of another checkpoint (or one this gateway already moved past)
        with self._lock:
            if self._canary_of is not None:
                return
        percent = float(info.evals["canary"]["percent"])
        self._backend.pin(info)  # loaded before any user lands on it
        with self._lock:
            self._canary = canary(info.checkpoint_id, percent)
            self._canary_of = (info.checkpoint_id, info.parent)
        log.info("serving: canary %s started on %g %% of users", info.checkpoint_id, percent)

    def _take_up_line(self, info: CheckpointInfo) -> None:
        """An organisation's checkpoint: serve it to its organisation when it is promoted, grows
        on the followed checkpoint and is newer than the one its organisation has."""
        org = info.org_id
        assert org is not None
        with self._lock:
            self._owners[info.checkpoint_id] = org
            before = self._lines.get(org)
            running = self._org_canaries.get(org)
        if info.status == CANARY:
            self._start_org_canary(info, before)
            return
        pinned = False
        if running is not None and running[1] == info.checkpoint_id:  # its canary's outcome
            with self._lock:
                del self._org_canaries[org]
            log.info("serving: canary %s of %s ended (%s)", info.checkpoint_id, org, info.status)
            pinned = info.status == PROMOTED  # loaded already: it goes on serving
            if not pinned:
                self._backend.unpin(info.checkpoint_id)
        if info.status != PROMOTED:
            return
        shared = self._backend.current_id
        if info.shared_base != shared:
            log.info("serving: %s of %s not served: it grows on %s, the shared line serves %s",
                     info.checkpoint_id, org, info.shared_base, shared)  # fmt: skip
            return
        if before is not None and not moves_forward(info, before):
            return
        if not pinned:
            self._backend.pin(info)  # loaded before any request of its organisation lands on it
        with self._lock:
            self._lines[org] = info
        if before is not None:
            self._backend.unpin(before.checkpoint_id)
        log.info("serving: %s now serves %s (was %s)", info.checkpoint_id, org,
                 before.checkpoint_id if before else "the shared line")  # fmt: skip

    def _start_org_canary(self, info: CheckpointInfo, line: CheckpointInfo | None) -> None:
        """An organisation's canary: the announced share of its own users on the candidate, the
        rest on what serves it now (its line, else the shared checkpoint), as experiment
        ``canary-<candidate>``; other organisations never see it. Started only on the checkpoint
        its organisation is served now, one at a time, and never under a fixed split."""
        org = info.org_id
        assert org is not None
        serving = line.checkpoint_id if line is not None else self._backend.current_id
        with self._lock:
            busy = org in self._org_canaries
        if self._fixed is not None or busy or info.parent != serving:
            log.info("serving: canary %s of %s not started (its parent %s; %s serves it)",
                     info.checkpoint_id, org, info.parent, serving)  # fmt: skip
            return
        percent = float(info.evals["canary"]["percent"])
        split = canary(info.checkpoint_id, percent)
        if line is not None:  # the parent arm is its line's checkpoint, not the shared one
            parent_arm, canary_arm = split.arms
            split = Split(split.experiment, (replace(parent_arm, checkpoint=serving), canary_arm))
        self._backend.pin(info)  # loaded before any of its users lands on it
        with self._lock:
            self._org_canaries[org] = (split, info.checkpoint_id, serving)
        log.info("serving: canary %s started on %g %% of %s's users", info.checkpoint_id,
                 percent, org)  # fmt: skip

    def _drop_stale_lines(self) -> None:
        """After the followed checkpoint moved: every line grown on another stops serving."""
        shared = self._backend.current_id
        with self._lock:
            stale = {org: i for org, i in self._lines.items() if i.shared_base != shared}
            for org in stale:
                del self._lines[org]
            # a canary whose parent no longer serves its organisation ends with it
            ended = {org: c for org, (_, c, parent) in self._org_canaries.items()
                     if parent != (self._lines[org].checkpoint_id if org in self._lines
                                   else shared)}  # fmt: skip
            for org in ended:
                del self._org_canaries[org]
        for org, candidate in ended.items():
            self._backend.unpin(candidate)
            log.info("serving: canary %s of %s ended (superseded)", candidate, org)
        for org, info in stale.items():
            self._backend.unpin(info.checkpoint_id)
            log.info("serving: %s no longer serves %s: it grows on %s, the shared line moved "
                     "to %s", info.checkpoint_id, org, info.shared_base, shared)  # fmt: skip
