"""Pure statistics shared by the stages that decide on live data: the canary (``release/``)
and the A/B report (``warehouse/``). Imports nothing of the project, so that any floor above
may use it."""
