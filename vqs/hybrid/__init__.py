"""HybridQueue: an in-process ``queue.Queue`` with a memory tier and a disk tier.

``from vqs.hybrid import HybridQueue`` (the lead exports it as ``vqs.HybridQueue``).
See queue.py and docs/hybrid.md.
"""

from queue import Empty, Full

from .queue import HybridMetrics, HybridQueue
from .serializers import Serializer

__all__ = ["Empty", "Full", "HybridMetrics", "HybridQueue", "Serializer"]
