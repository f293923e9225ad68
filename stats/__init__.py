"""Pure statistics shared by the stages that decide: the offline gate's t quantile and the
canary (``release/``), and the A/B report (``warehouse/``). Imports nothing of the project, so
that any floor above may use it."""
