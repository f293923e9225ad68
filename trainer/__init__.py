"""The trainer: the learner (``learner``, its config and flags), one round of ``rtrl train``
(``train``: batches → examples → update → the release gate → a registered candidate), the
round's saved state (``round_state``), the batches it may train on (``inputs``) and the service
that runs a round whenever the served checkpoint has a new batch (``service``)."""
