# The VQS server in a container: REST, the SQS-compatible API and metrics on port 8642.
#
#   docker build -t vqs .
#   docker run -p 8642:8642 -v vqs-data:/data -e VQS_TOKENS=secret -e VQS_SIGV4_KEYS=AKID:SECRET vqs
#
# Listening on 0.0.0.0 (needed inside a container), the server refuses to start
# without bearer tokens (VQS_TOKENS: REST, metrics, console; VQS_SIGV4_KEYS adds
# SQS) unless VQS_INSECURE=1; without credentials it answers only the Host names
# localhost, IP addresses and VQS_ALLOWED_HOSTS (docs/security.md). The data directory is the
# volume /data: one container owns it.
# Settings: docs/server.md (every one has a VQS_<NAME> variable).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# What the wheel's build needs: the package, the build hook and what it packs (the JVM
# reader's sources and their build script; no JDK here, so no jar: Spark is not served).
COPY pyproject.toml README.md hatch_build.py ./
COPY spark-connector/build.py ./spark-connector/build.py
COPY spark-connector/src ./spark-connector/src
COPY vqs ./vqs
RUN pip install ".[server,grpc,oauth]" && rm -rf /src

RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin vqs \
    && mkdir -p /data && chown vqs:vqs /data
USER vqs
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8642

# /health/ready answers 200 once the data directory is open (503 while starting or stopping);
# over https when the server's certificate is given as VQS_TLS_CERT (loopback: not verified).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import ssl, sys, urllib.request as u; sys.exit(u.urlopen('http${VQS_TLS_CERT:+s}://127.0.0.1:8642/health/ready', timeout=2, context=ssl._create_unverified_context()).status != 200)"

# SIGTERM (docker stop) drains in-flight requests, flushes and closes every log. docker stop
# kills after 10 s by default: the drain is held to 7 s (the server's default is 25 s), so the
# flush and close that follow it finish first; with a longer `docker stop -t` raise it too.
ENV VQS_GRACEFUL_TIMEOUT_S=7
STOPSIGNAL SIGTERM
CMD ["vqs", "serve", "--host", "0.0.0.0", "--port", "8642", "--data-dir", "/data"]
