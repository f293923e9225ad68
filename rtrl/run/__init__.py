"""`rtrl run`: the whole loop, locally (``rtrl.run.loop``), its options and their world-dependent
defaults, its training rounds, the closing A/B test, and the stages it starts as child
processes."""
