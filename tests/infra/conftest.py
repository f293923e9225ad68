"""Fixtures of the infra tests (broker, topics, ACLs, compose): they use the session broker
and ``topic_names`` from ``tests/conftest.py``; ``infra_probe`` lists the CLI's subcommands and
``faust_probe_app`` is the Faust worker that ``test_kafka_faust`` runs."""
