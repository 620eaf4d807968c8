# syntax=docker/dockerfile:1
# Image of the domain controller (Deployment, leader-elected): python -m services.domain_controller
# Build from the repository root: docker build -f docker/domain-controller.Dockerfile -t cdo/domain-controller:0.1.0 .

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
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["python", "-m", "services.domain_controller"]
