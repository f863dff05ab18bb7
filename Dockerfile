# One image for every RetryLens process (consumer, API, dashboard, CLI jobs).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
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
RUN pip install . && useradd --create-home retrylens
USER retrylens
ENTRYPOINT ["retrylens"]
