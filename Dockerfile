# Firebreak's image: `firebreak serve` as a non-root user on a read-only root filesystem.
#   docker build -t <registry>/firebreak:0.1.0 .
# The package is installed from this checkout (no dev or test extras) into a virtualenv in a build
# stage; the runtime stage gets only that virtualenv. Exec credential plugins for the cells'
# kubeconfig (aws, gke-gcloud-auth-plugin, kubelogin) are not in it: docs/operating.md "Production:
# Firebreak in one cluster, the cells in others" shows how to build an image on top of this one
# that has yours.
#
# The base is pinned by tag and digest (the multi-platform index). To move it:
#   docker buildx imagetools inspect python:3.11.<n>-slim-bookworm   # the new digest
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY levers ./levers
COPY policies ./policies
# Every dependency has a wheel for CPython 3.11 on linux (amd64, arm64): no compiler needed.
RUN python -m venv /opt/firebreak \
 && /opt/firebreak/bin/pip install . \
 && /opt/firebreak/bin/firebreak --help > /dev/null

FROM ${PYTHON_IMAGE}
# pip compiled the byte code above: at run time the root filesystem is read-only.
ENV PATH=/opt/firebreak/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 firebreak \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin firebreak
COPY --from=build /opt/firebreak /opt/firebreak
# No policies/ here: FIREBREAK_POLICY_DIR (the Deployment's ConfigMap), else the packaged defaults.
WORKDIR /tmp
USER 10001:10001
EXPOSE 3000
# Kubernetes probes /healthz and /readyz (deploy/base/deployment.yaml): no HEALTHCHECK.
ENTRYPOINT ["firebreak", "serve"]
CMD ["--host", "0.0.0.0", "--port", "3000"]
