"""scrtune: tune SCR checkpointing from the job's own DFTracer I/O events."""

__version__ = "0.1.0"
