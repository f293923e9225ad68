# The two commands of the quick start: `make run` (the whole loop, locally) and `make test`.
.PHONY: run test lint bootstrap

bootstrap:
	@scripts/bootstrap

run: bootstrap
	.venv/bin/rtrl run

test: bootstrap
	scripts/test

lint: bootstrap
	.venv/bin/ruff check .
