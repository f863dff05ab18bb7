"""RetryLens package."""
