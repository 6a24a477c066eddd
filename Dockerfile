# Rearrange service image. Build from the repository root:
#   docker build -t rearrange:dev --build-arg COMMIT=$(git rev-parse --short=12 HEAD) .
# Stage 1 installs the package and its runtime dependencies (never the dev extra) into a
# virtualenv, compiling the Rust engine with a toolchain borrowed from the rust image, then
# once more with profile-guided optimization;
# stage 2 copies only that venv and the sample config onto a fresh slim base,
# so no compiler, pip cache or source tree ships. The image runs as uid 10001 (numeric, so
# Kubernetes' runAsNonRoot can verify it) and starts with the README's command.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG RUST_IMAGE=rust:1-slim-bookworm

# The Rust toolchain only: the build stage borrows it to compile the engine (crates/engine).
FROM ${RUST_IMAGE} AS rust

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CARGO_HOME=/usr/local/cargo RUSTUP_HOME=/usr/local/rustup PATH=/usr/local/cargo/bin:$PATH
COPY --from=rust /usr/local/cargo /usr/local/cargo
COPY --from=rust /usr/local/rustup /usr/local/rustup
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* \
    && python -m venv /opt/venv
WORKDIR /src
# One install of the package with its runtime dependencies (its wheel carries LICENSE): a
# change to app/ or the README reinstalls them too (no separate dependency layer; pip's
# cache is off, so a rebuild downloads them again).
COPY pyproject.toml README.md LICENSE Cargo.toml Cargo.lock ./
COPY crates ./crates
COPY app ./app
RUN /opt/venv/bin/pip install . \
    && /opt/venv/bin/rearrange check-config --help > /dev/null
# Then the engine that ships: built with profile-guided optimization (bench/pgo.py, the
# benchmarks' pages as the training run, 8-17 % less engine time per request), its wheel
# installed over the plain one. maturin and llvm-profdata live in /opt/build, which the
# runtime stage never copies.
COPY config ./config
COPY bench/__init__.py bench/pages.py bench/pgo.py ./bench/
RUN rustup component add llvm-tools \
    && python -m venv /opt/build && /opt/build/bin/pip install "maturin>=1.10,<2" \
    && PATH=/opt/build/bin:$PATH /opt/venv/bin/python -m bench.pgo --wheel-dir /tmp/wheels \
    && /opt/venv/bin/pip install --no-deps --force-reinstall /tmp/wheels/rearrange-*.whl \
    && /opt/venv/bin/rearrange check-config config/rules.yaml > /dev/null

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="rearrange" \
      org.opencontainers.image.description="Post-ranking rule pipeline over a search result page" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 rearrange \
    && useradd --system --uid 10001 --gid 10001 --home-dir /srv --shell /usr/sbin/nologin rearrange
COPY --from=build /opt/venv /opt/venv
WORKDIR /srv
COPY config ./config
RUN mkdir -p /srv/var && chown 10001:10001 /srv/var
# rearrange_build_info{commit}: the image has no checkout to read it from.
ARG COMMIT=unknown
ENV REARRANGE_BUILD_COMMIT=${COMMIT}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    REARRANGE_HOST=0.0.0.0 \
    REARRANGE_PORT=8080 \
    REARRANGE_DATA_PORT=8081 \
    REARRANGE_CONFIG=/srv/config/rules.yaml \
    REARRANGE_BANLIST_PATH=/srv/var/banlist.jsonl
USER 10001:10001
# Two listeners: the data port (POST /v1/rerank and GET /healthz: what the balancer and the
# search frontend call) and the control port (every route: the admin API, the inspector,
# /metrics, /readyz), so a network policy can keep the admin surface away from the
# frontend's network.
EXPOSE 8081 8080
# Liveness only: readiness (/readyz, 503 while draining) is the load balancer's call. Healthy
# means both listeners answer /healthz: the data port is what the balancer needs (compose's
# nginx waits for this check before it starts), the control port is the only way to reach
# the admin API and /metrics, and a process with either one dead is no replica.
# The ports open once the banlist is loaded: 3 minutes of grace, as the Kubernetes startup
# probe (a 1 M-entry embedded list: 22 s to seed on first start, 7 s to replay after;
# deploy/README.md, "Memory"), so depends_on does not give up on a slower machine.
HEALTHCHECK --interval=10s --timeout=3s --start-period=180s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; ports = (os.environ.get('REARRANGE_DATA_PORT', '8081'), os.environ.get('REARRANGE_PORT', '8080')); sys.exit(any(urllib.request.urlopen(f'http://127.0.0.1:{p}/healthz', timeout=1).status != 200 for p in ports))"]
# SIGTERM (Docker's and Kubernetes' default) starts the graceful shutdown: /readyz (control
# port) turns 503 while both ports still serve for REARRANGE_DRAIN_SECONDS, then both
# listeners stop accepting, in-flight requests finish (up to 10 s) and the process exits.
STOPSIGNAL SIGTERM
CMD ["rearrange", "serve"]
