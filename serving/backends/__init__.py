"""The gateway's backends: what answers a completion once it is admitted.

- ``base``: the protocol every backend implements (``Backend``), which ``completions`` calls.
- ``local``: the model on this machine, through the trainer's policy interface.
- ``batcher``: concurrent requests to the local backend, sampled together.
- ``upstream``: any OpenAI-compatible server (vLLM, another gateway) asked over HTTP.
- ``upstream_protocol``: the upstream's request bodies and answers, pure.
- ``upstream_http``: the connections to an upstream's servers, and the POST every upstream
  backend asks with.
- ``llamacpp``: a llama-server upstream asked on its native endpoints (``llamacpp.native``);
  the way of asking them (``LlamaCppNative``) is an object that the engine's backend holds too.
- ``llamacpp_engine``: ``--engine llama.cpp``, a server per checkpoint and the switch between
  them.

Nothing is imported here: a gateway in front of an upstream must not load the local backend's
ML framework (``tests/serving/test_gateway_imports.py``).
"""
