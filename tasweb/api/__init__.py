"""The REST API: the mirrored cluster, the engine's decisions and explanations, what-if
passes, and Kueue's visibility API for pending workloads."""
