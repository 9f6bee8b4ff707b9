"""HybridQueue: an in-process ``queue.Queue`` with a memory tier and a disk tier.

``from vqs.hybrid import HybridQueue`` (also ``vqs.HybridQueue``). The facade
is hybrid_queue.py, the disk tier disk_tier.py; see docs/hybrid.md.
"""

from queue import Empty, Full

from ..errors import ShutDown
from .hybrid_queue import HybridQueue
from .metrics import HybridMetrics
from .serializers import Serializer

__all__ = ["Empty", "Full", "HybridMetrics", "HybridQueue", "Serializer", "ShutDown"]
