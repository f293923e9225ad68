# The platform's Python services (collector, stream worker, warehouse sink, CLI) in one image.
# Kafka itself runs from the official apache/kafka image; see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY infra/ infra/
COPY ingest/ ingest/
COPY rewards/ rewards/
COPY streams/ streams/
COPY warehouse/ warehouse/
COPY trainer/ trainer/
COPY rtrl/ rtrl/
RUN pip install . && useradd --create-home --uid 10001 rtrl \
    && mkdir -p /data && chown rtrl /data

# State (Faust's table store, the warehouse) lives under /data: mount a volume there.
USER rtrl
WORKDIR /data
CMD ["rtrl", "--help"]
