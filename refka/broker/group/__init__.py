"""Consumer groups: the classic-protocol group coordinator (coordinator.py),
committed offsets (offsets.py) and their home, the internal
``__consumer_offsets`` topic, in Kafka's record formats (storage.py)."""

from .coordinator import GroupCoordinator, GroupSettings, GroupState, IllegalGroupTransition
from .storage import OFFSETS_TOPIC

__all__ = ["GroupCoordinator", "GroupSettings", "GroupState", "IllegalGroupTransition", "OFFSETS_TOPIC"]
