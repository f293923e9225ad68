# The two commands of the quick start: `make run` (the whole loop, locally) and `make test`.
.PHONY: run test lint bootstrap

bootstrap:
	@scripts/bootstrap

run: bootstrap
	.venv/bin/rtrl run

# scripts/test runs the setup itself, leaving llama.cpp's build to finish beside its checks
test:
	scripts/test

lint: bootstrap
	.venv/bin/ruff check .
