"""The model layer the trainer, the release decision and the gateway stand on: the sampling
distribution (``sampling``), a Hugging Face causal LM behind one interface (``policy``), loading
weights and adapters (``loading``, ``lora_settings``), the tiny test model (``tiny_model``), the
models that install offline (``catalog``, ``rtrl models`` in ``cli``), the rollout format
(``rollout``), decoding under a grammar and replaying its masks (``constraint``,
``grammar_mask``), training examples (``examples``), scoring recorded completions (``scoring``)
and the device (``devices``)."""
