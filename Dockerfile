# The platform's Python services in one image, built once and run by every service of
# docker-compose.yml: the collector, the stream worker, the warehouse sink, the batch builder and
# the CLI (target `services`, the default, without torch). The gateway (serving/), the trainer
# (trainer/) and the release decision (release/) load models: target `model` adds torch (a CPU
# build) and the model libraries on top of it. Every folder is copied into both, since `rtrl`
# lists every subcommand; a command's handler imports its model libraries only when it runs.
# Kafka itself runs from the official apache/kafka image; see docker-compose.yml.
FROM python:3.11-slim AS services

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Dependencies first, from pyproject.toml's pins alone: a code change rebuilds only the layers below.
COPY pyproject.toml README.md LICENSE ./
COPY docker/requirements.py docker/
RUN python docker/requirements.py services > /tmp/services.txt \
    && pip install -r /tmp/services.txt
COPY infra/ infra/
COPY ingest/ ingest/
COPY stats/ stats/
COPY rewards/ rewards/
COPY streams/ streams/
COPY warehouse/ warehouse/
COPY models/ models/
COPY checkpoints/ checkpoints/
COPY agent/ agent/
COPY llamacpp/ llamacpp/
COPY serving/ serving/
COPY otel/ otel/
COPY trainer/ trainer/
COPY release/ release/
COPY console/ console/
COPY rtrl/ rtrl/
# --no-deps: the model libraries stay out of this image (they are target `model`'s).
RUN pip install . --no-deps && useradd --create-home --uid 10001 rtrl \
    && mkdir -p /data && chown rtrl /data

# State (Faust's table store, the warehouse) lives under /data: mount a volume there.
USER rtrl
WORKDIR /data
CMD ["rtrl", "--help"]

FROM services AS model
USER root
# torch from its CPU index (the default wheel carries CUDA: gigabytes no CPU host uses), then
# the rest of the model libraries at the project's pins; torch==X matches the CPU build X+cpu.
RUN python /src/docker/requirements.py model > /tmp/model.txt \
    && pip install --index-url https://download.pytorch.org/whl/cpu "$(grep '^torch==' /tmp/model.txt)" \
    && pip install -r /tmp/model.txt
USER rtrl
