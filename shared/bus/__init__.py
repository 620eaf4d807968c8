"""The NATS event bus: CloudEvents over NATS, JetStream history, KV snapshots."""

from shared.bus.bus import EventBus
from shared.bus.history import Delivery, StartAt
from shared.bus.settings import NatsSettings

__all__ = ["Delivery", "EventBus", "NatsSettings", "StartAt"]
