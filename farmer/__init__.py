"""farmer: a make-like incremental build executor."""

__version__ = "0.1.0"
