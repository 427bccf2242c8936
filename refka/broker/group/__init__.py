"""Consumer groups: the classic-protocol group coordinator (coordinator.py: where
groups live, offsets and admin requests), the group membership protocol
(membership.py: JoinGroup, SyncGroup, Heartbeat, LeaveGroup), the model of a group
(metadata.py), committed offsets (offsets.py) and their home, the internal
``__consumer_offsets`` topic, in Kafka's record formats (storage.py), and
refka's KIP-253 positions shared within a group (positions.py)."""

from .coordinator import GroupCoordinator, GroupSettings
from .metadata import GroupState, IllegalGroupTransition
from .storage import OFFSETS_TOPIC

__all__ = ["GroupCoordinator", "GroupSettings", "GroupState", "IllegalGroupTransition", "OFFSETS_TOPIC"]
