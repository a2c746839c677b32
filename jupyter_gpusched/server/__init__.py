from .app import GPUSched

__all__ = ["GPUSched"]
