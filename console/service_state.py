"""Which service a Prometheus endpoint is and what it is doing, in a few words for the live page:
read from its metrics' names (the URLs need no labels) and from the phase and passes the
`--watch` services publish (``trainer/metrics.py``, ``infra/watch_metrics.py``). Pure.

>>> s = {"rtrl_trainer_phase{rtrl_trainer_phase=waiting}": 1.0,
...      "rtrl_trainer_phase{rtrl_trainer_phase=idle}": 0.0,
...      "rtrl_trainer_evidence{what=runs,of=have}": 12.0,
...      "rtrl_trainer_evidence{what=runs,of=need}": 50.0,
...      "rtrl_trainer_evidence{what=users,of=have}": 4.0,
...      "rtrl_trainer_evidence{what=users,of=need}": 10.0}
>>> service_of(s), state_of("trainer", s)
('trainer', 'waiting for evidence: 12 of 50 held-out runs, 4 of 10 users')
>>> state_of("batch builder", {"rtrl_batches_passes_total{outcome=worked}": 2.0,
...                            "rtrl_batches_passes_total{outcome=given_up}": 1.0})
'up: 2 passes worked, 1 given up'
"""

from __future__ import annotations

import re

_KEY = re.compile(r"^(?P<name>[a-z_:]+)(?:\{(?P<labels>.*)\})?$")
# a metric name's prefix, and the service that publishes it
SERVICES = (
    ("rtrl_collector_", "collector"),
    ("rtrl_stream_", "stream worker"),
    ("rtrl_sink_", "warehouse sink"),
    ("rtrl_gateway_", "gateway"),
    ("rtrl_trainer_", "trainer"),
    ("rtrl_batches_", "batch builder"),
    ("rtrl_canary_", "canary"),
)
_PASSES = {"batch builder": "rtrl_batches_passes_total", "canary": "rtrl_canary_passes_total"}
_PHASES = {
    "starting": "starting",
    "idle": "idle: no new batch of the served checkpoint",
    "training": "training: a round in progress",
    "stopping": "stopping",
}


def _parts(key: str) -> tuple[str, dict[str, str]]:
    match = _KEY.match(key)
    if match is None:
        return key, {}
    labels = match["labels"] or ""
    return match["name"], dict(p.split("=", 1) for p in labels.split(",") if "=" in p)


def service_of(samples: dict[str, float]) -> str | None:
    """The service whose metrics these are; None: not one of the platform's."""
    for key in samples:
        for prefix, service in SERVICES:
            if key.startswith(prefix):
                return service
    return None


def state_of(service: str | None, samples: dict[str, float]) -> str:
    """What the service is doing: the trainer's phase (and, waiting, the evidence it has and
    needs), a watch service's passes by outcome, the gateway's llama-servers started again;
    "up" for the others.

    >>> state_of("gateway", {"rtrl_gateway_engine_restarts_total": 2.0})
    'up: 2 llama-server restart(s)'
    """
    if service == "trainer":
        phase = next((labels["rtrl_trainer_phase"] for key, value in samples.items()
                      for name, labels in [_parts(key)]
                      if name == "rtrl_trainer_phase" and value == 1.0), None)  # fmt: skip
        if phase == "waiting":
            ev = {(labels["what"], labels["of"]): value for key, value in samples.items()
                  for name, labels in [_parts(key)] if name == "rtrl_trainer_evidence"}  # fmt: skip
            return (f"waiting for evidence: {ev.get(('runs', 'have'), 0):.0f} of "
                    f"{ev.get(('runs', 'need'), 0):.0f} held-out runs, "
                    f"{ev.get(('users', 'have'), 0):.0f} of {ev.get(('users', 'need'), 0):.0f} "
                    "users")  # fmt: skip
        return _PHASES.get(phase or "", "up")
    if service in _PASSES:
        by = {labels.get("outcome", ""): value for key, value in samples.items()
              for name, labels in [_parts(key)] if name == _PASSES[service]}  # fmt: skip
        words = (("worked", "passes worked"), ("idle", "idle"), ("given_up", "given up"))
        said = [f"{by[o]:.0f} {w}" for o, w in words if by.get(o)]
        return "up: " + ", ".join(said) if said else "up: no pass yet"
    if service == "gateway":
        restarts = samples.get("rtrl_gateway_engine_restarts_total", 0.0)
        return f"up: {restarts:.0f} llama-server restart(s)" if restarts else "up"
    return "up"
