"""Cross-cutting pieces of the service: health checks and the worker heartbeat."""
