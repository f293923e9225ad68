"""`rtrl serve`: an OpenAI-compatible gateway that records every completion as a rollout.

- ``cli``: the ``rtrl serve`` command and its options.
- ``server``: builds one gateway (backend, recorder, follower, keys, HTTP servers) and closes it.
- ``api``: the FastAPI routes (completions, chat, models, vLLM's adapter endpoint, probes).
- ``fast_path``: the two completion routes answered straight from ASGI, ahead of FastAPI.
- ``completions``: one completion request from admission to answer (the orchestrator).
- ``answers``: OpenAI's error form, the JSON answer, the call run once an answer is sent.
- ``protocol``: the OpenAI API's request and response shapes (with vLLM's token-id extensions).
- ``backends``: what answers an admitted completion (the ``Backend`` protocol, the local model,
  an OpenAI-compatible upstream, llama-server, the ``--engine llama.cpp`` fleet).
- ``generation``: the whole response of a backend's answer (``models.generation.Generation``).
- ``stream``: a completion as server-sent events, built as its tokens come.
- ``routing``: which checkpoint serves a user (experiment splits, the canary's).
- ``assignment``: the routing as the checkpoints topic moves (canaries started and ended).
- ``follower``: follows the checkpoints topic.
- ``rollouts``: the rollout of a completion, built off the event loop and spooled to Kafka.
- ``metrics``: the gateway's Prometheus metrics.
"""
