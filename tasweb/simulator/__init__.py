"""The simulator: the cluster of the embedded default, generated and run step by step."""
