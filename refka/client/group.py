"""The reference consumer's group membership."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemberIdentity:
    """Who this consumer is in its group after a SyncGroup: what ConsumerGroupPosition carries."""

    group_id: str
    member_id: str
    generation_id: int
