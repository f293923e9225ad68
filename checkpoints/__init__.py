"""Checkpoints: the record of one (``record``), the registry on disk (``store``), a checkpoint's
weights (``weights``), announcements on the ``checkpoints`` topic (``publish``), the canary's
names (``canary_names``), the lineage plot (``lineage_plot``) and ``rtrl checkpoints`` (``cli``)."""
