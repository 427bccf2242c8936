"""The private ZooKeeper the tests start (refka.zookeeper, Debian's package)."""

from refka.zookeeper import ZooKeeperServer, four_letter, free_port, zookeeper_unavailable

__all__ = ["ZooKeeperServer", "four_letter", "free_port", "zookeeper_unavailable"]
