"""The roof: the `rtrl` console script. It imports the stages; no stage imports it."""
