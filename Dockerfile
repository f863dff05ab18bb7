# One image for every RetryLens process (consumer, API, dashboard, CLI jobs).
# Dependencies are installed exactly as locked (requirements/server.txt, exported from
# uv.lock with hashes), then RetryLens itself without resolving anything again.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY requirements/server.txt ./requirements/server.txt
RUN pip install --require-hashes -r requirements/server.txt
COPY pyproject.toml README.md ./
COPY retrylens ./retrylens
COPY schemas ./schemas
COPY ingest ./ingest
COPY store ./store
COPY analytics ./analytics
COPY sdk ./sdk
COPY simulation ./simulation
COPY api ./api
COPY dashboard ./dashboard
COPY evaluation ./evaluation
RUN pip install --no-deps . && useradd --create-home retrylens
USER retrylens
ENTRYPOINT ["retrylens"]
