"""Cluster sources: the Kubernetes mirror (list + watch into the mirrored cluster) and, in
control mode, the writer that sends the engine's decisions back to the cluster."""
