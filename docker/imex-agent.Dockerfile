# syntax=docker/dockerfile:1
# Image of the IMEX agent (DaemonSet on GPU nodes): python -m services.imex_agent
# Build from the repository root: docker build -f docker/imex-agent.Dockerfile -t cdo/imex-agent:0.1.0 .

# -- build: the cdo wheel and its dependencies into a virtual environment --------------------
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY services ./services
COPY shared ./shared
COPY sim ./sim
COPY cli ./cli
# The project and its runtime dependencies, without the dev extra; pip itself is not kept.
RUN python -m venv /opt/cdo \
    && /opt/cdo/bin/pip install --no-cache-dir . \
    && /opt/cdo/bin/pip uninstall --yes pip

# -- run: the interpreter and the environment, nothing to build with -------------------------
FROM python:3.11.11-slim-bookworm
# The base image's own installer and build tools go: nothing is installed at run time.
RUN python -m pip uninstall --yes --no-cache-dir pip setuptools wheel
COPY --from=build /opt/cdo /opt/cdo
ENV PATH=/opt/cdo/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The DaemonSet runs this image as UID 0 with CAP_MKNOD only (channel device nodes, the
# kubelet's plugin directories); the image itself defaults to an unprivileged user.
USER 65532:65532
EXPOSE 50080
ENTRYPOINT ["python", "-m", "services.imex_agent"]
