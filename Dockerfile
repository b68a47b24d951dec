# syntax=docker/dockerfile:1
# The metashard image: `make image` (or `docker build -t metashard .`).
#
# - build stage: builds the project's wheel and the wheels of its dependencies (binary wheels
#   only, so no compiler is needed anywhere);
# - final stage: installs exactly that wheelhouse, offline, into a slim Python; runs as a
#   numeric non-root user; writes nothing outside /tmp (the chart mounts an emptyDir there),
#   so a read-only root filesystem works. The chart's containers pass only arguments:
#   `metashard coordinator ...` / `metashard worker ...`.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY proto ./proto
COPY manager ./manager
COPY workers ./workers
COPY loadtest ./loadtest
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && python -m pip download --no-cache-dir --only-binary=:all: --dest /wheels /wheels/metashard-*.whl

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    TMPDIR=/tmp
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-cache-dir --no-index --find-links /wheels metashard \
 && metashard --version
USER 65532:65532
WORKDIR /tmp
EXPOSE 7070 8081 9999
ENTRYPOINT ["metashard"]
CMD ["--help"]
