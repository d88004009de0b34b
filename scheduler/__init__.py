"""Topology Aware Scheduling engine: Kueue's TAS (KEP-2724) in pure Python.

Objects in, decisions out. Nothing here imports Django or Celery or does I/O
beyond what the command line (`scheduler.cli`) asks for.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
