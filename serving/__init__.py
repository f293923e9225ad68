"""`rtrl serve`: an OpenAI-compatible gateway that records every completion as a rollout.

- ``cli``: the ``rtrl serve`` command and its options.
- ``server``: builds one gateway (backend, recorder, follower, keys, HTTP servers) and closes it.
- ``api``: the FastAPI routes (completions, chat, models, vLLM's adapter endpoint, probes).
- ``fast_path``: the two completion routes answered straight from ASGI, ahead of FastAPI.
- ``completions``: one completion request from admission to answer (the orchestrator).
- ``answers``: OpenAI's error form, the JSON answer, the call run once an answer is sent.
- ``protocol``: the OpenAI API's request and response shapes (with vLLM's token-id extensions).
- ``backend``: the protocol every backend implements.
- ``local``: the local backend, the model on this machine.
- ``batcher``: concurrent requests to the local backend, sampled together.
- ``upstream``: the upstream backend, any OpenAI-compatible server (vLLM, another gateway).
- ``generation``: the whole response and the rollout of a backend's answer
  (``models.generation.Generation``).
- ``llamacpp``: a llama-server upstream asked on its native endpoints (``llamacpp.native``).
- ``llamacpp_switch``: ``--engine llama.cpp``, a server per checkpoint and the switch between them.
- ``stream``: a completion as server-sent events, built as its tokens come.
- ``routing``: which checkpoint serves a user (experiment splits, the canary's).
- ``assignment``: the routing as the checkpoints topic moves (canaries started and ended).
- ``follower``: follows the checkpoints topic.
- ``recorder``: builds rollouts off the event loop and spools them to Kafka in bursts.
- ``metrics``: the gateway's Prometheus metrics.
"""
