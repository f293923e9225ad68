"""The llama.cpp runtime: ``llama-server`` built from a pinned source, run, converted to and
sampled from, for whoever needs it (the gateway's engine, the trainer's evals, the loop).

- ``build``: builds llama-server once into the cache from the pinned source.
- ``server``: one llama-server child process (``LlamaServer``) and its configuration.
- ``fleet``: one server for each checkpoint served (``EngineFleet``), threads divided among them.
- ``convert``: a checkpoint into what llama-server loads (llama.cpp's own converters).
- ``gguf_tokenizer``: a converted GGUF given its base's tokenizer metadata.
- ``native``: the native endpoints' request bodies and answers (pure), ``LlamaCppError``.
- ``sampler``: the evals' sampler over a llama-server of its own (``EngineSampler``).
- ``cli``: the engine's settings from command-line options.

Below ``serving/`` (whose llama.cpp backends use it) and ``trainer/``: neither needs the other
to run llama.cpp.
"""
