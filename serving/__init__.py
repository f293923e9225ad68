"""`rtrl serve`: an OpenAI-compatible gateway that records every completion as a rollout.

``protocol`` holds the request and response shapes of the OpenAI API (with vLLM's token-id
extensions), ``generation`` the one internal answer every backend gives, ``local`` and
``upstream`` the two backends, ``routing`` which checkpoint serves a request (the followed one or
an experiment's arm), ``recorder`` the way to Kafka, ``api`` the routes and ``cli`` the command.
"""
