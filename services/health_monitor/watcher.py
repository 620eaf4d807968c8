"""The NVML watcher of one node: readings and XID events in, :class:`Observations` out.

    watcher = NvmlWatcher(node_name=name, nvml=nvml, observations=observations,
                          classifier=classifier, metrics=metrics, settings=settings,
                          clock=time.monotonic, on_change=dirty.set)
    await watcher.run()     # until cancelled

:meth:`NvmlWatcher.run` initialises NVML, retrying with backoff (``CDO_HEALTH_NVML_RETRY_S``
doubling to ``_MAX_S``) while NVML is unavailable, which it reports as the ``nvml.unavailable``
fault. Once initialised it runs two loops until NVML goes away or a call fails:

- **readings**: every ``read_interval_s`` (or at once after an ECC or recovery-action event)
  read every GPU in a worker thread, derive and classify its signals (:func:`triage`, pure) and
  give the state faults and the clique to the observations; transient faults are latched;
- **events**: wait for XID, ECC and recovery-action events in a worker thread and latch the
  transient faults they carry. A lost GPU ends the subscription (NVML cannot unregister it); a
  new one covers the GPUs that remain, and again when the GPU returns.

``on_change`` is called whenever the observations changed, so the monitor evaluates again. The
watcher also keeps each GPU's UUID, learnt at initialisation, for the events (:attr:`uuids`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping

import msgspec

from services.health_monitor.classification import Classifier
from services.health_monitor.derive import event_signal, node_signals
from services.health_monitor.faults import Fault, fault_key, fault_of, is_transient, signal_family
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.observations import Observations
from services.health_monitor.readings import NodeReading, read_node
from services.health_monitor.settings import MonitorSettings
from services.health_monitor.signals import NvmlUnavailable, Signal
from shared.nvml import (
    DeviceEvent,
    EventKind,
    EventSubscription,
    GpuLostError,
    Nvml,
    NvmlCallError,
    NvmlError,
    NvmlUnavailableError,
    node_clique,
    subscribed,
)

log = logging.getLogger("cdo.health_monitor")

# Event kinds that say "a counter or field changed": read now instead of at the next tick.
_READ_ON = frozenset({EventKind.DOUBLE_BIT_ECC, EventKind.RECOVERY_ACTION})


class Triage(msgspec.Struct, frozen=True, kw_only=True):
    """One reading's signals sorted out (:func:`triage`)."""

    state: tuple[Fault, ...] = ()  # faults that last as long as the readings show them
    transient: tuple[Fault, ...] = ()  # faults reported once (XIDs, ECC rises): to latch
    keys: frozenset[str] = frozenset()  # every classified, not ignored signal's fault key
    counted: tuple[tuple[str, str], ...] = ()  # (family, severity) of the signals to count


def triage(signals: Iterable[Signal], *, classifier: Classifier, known: frozenset[str]) -> Triage:
    """Classify a reading's signals; ``known`` are the keys the previous reading had.

    A state signal is counted when it appears (its key not in ``known``), a transient one each
    time it is reported.
    """
    state: list[Fault] = []
    transient: list[Fault] = []
    keys: set[str] = set()
    counted: list[tuple[str, str]] = []
    for signal in signals:
        verdict = classifier.classify(signal)
        if verdict.ignored:
            continue
        key = fault_key(verdict.rule, signal.gpu)
        keys.add(key)
        if key not in known or is_transient(signal):
            counted.append((signal_family(signal), verdict.severity.value))
        fault = fault_of(signal, verdict)
        if fault is not None:
            (transient if is_transient(signal) else state).append(fault)
    return Triage(
        state=tuple(state), transient=tuple(transient), keys=frozenset(keys), counted=tuple(counted)
    )


def _drain(subscription: EventSubscription) -> list[DeviceEvent]:
    """Every event the subscription can still deliver without waiting."""
    events: list[DeviceEvent] = []
    with contextlib.suppress(NvmlError):  # a lost GPU ends the set after its queued events
        while subscription.wait(timeout_s=0):
            while (event := subscription.next_event()) is not None:
                events.append(event)
    return events


class NvmlWatcher:
    """Feeds one node's observations from NVML until cancelled."""

    def __init__(
        self,
        *,
        node_name: str,
        nvml: Nvml,
        observations: Observations,
        classifier: Classifier,
        metrics: HealthMetrics,
        settings: MonitorSettings,
        clock: Callable[[], float],
        on_change: Callable[[], None],
    ) -> None:
        self._node_name = node_name
        self._nvml = nvml
        self._observations = observations
        self._classifier = classifier
        self._metrics = metrics
        self._settings = settings
        self._clock = clock
        self._on_change = on_change
        self._ready = False
        metrics.nvml_available.set(0)
        self._uuids: dict[int, str] = {}
        self._lost: frozenset[int] = frozenset()  # GPUs the last reading found lost
        self._reading_keys: frozenset[str] = frozenset()
        self._read_now = asyncio.Event()
        self._resubscribe = False  # the set of GPUs changed: subscribe for the ones there

    @property
    def available(self) -> bool:
        """True once NVML answered a whole reading, False while it cannot be read."""
        return self._ready

    @property
    def uuids(self) -> Mapping[int, str]:
        """Each GPU's UUID, by index; a lost GPU keeps the UUID learnt before."""
        return self._uuids

    async def run(self) -> None:
        pause = self._settings.nvml_retry_s
        while True:
            try:
                await asyncio.to_thread(self._nvml.init)
            except NvmlUnavailableError as exc:
                self._unavailable(str(exc))
                await asyncio.sleep(pause)
                pause = min(pause * 2, self._settings.nvml_retry_max_s)
                continue
            pause = self._settings.nvml_retry_s
            try:
                await self._session()
            except* NvmlUnavailableError as group:
                self._unavailable("; ".join(str(exc) for exc in group.exceptions))
            except* NvmlError as group:
                # A call that failed for another reason: start over with a fresh initialisation.
                self._metrics.errors.labels("health-nvml").inc()
                log.warning(
                    "NVML session failed; initialising again",
                    extra={"node": self._node_name, "error": str(group.exceptions[0])},
                )
            finally:
                self._ready = False
                with contextlib.suppress(NvmlError):
                    await asyncio.to_thread(self._nvml.shutdown)
            await asyncio.sleep(pause)

    def _unavailable(self, reason: str) -> None:
        observations = self._observations
        if observations.unavailable is None:
            log.warning("NVML unavailable", extra={"node": self._node_name, "error": reason})
        self._ready = False
        self._metrics.nvml_available.set(0)
        signal = NvmlUnavailable(reason=reason)
        verdict = self._classifier.classify(signal)
        fault = fault_of(signal, verdict)
        if not verdict.ignored and observations.unavailable is None:
            self._metrics.signals.labels("nvml", verdict.severity.value).inc()
        if observations.update_reading(
            [fault] if fault is not None else [], clique=None, unavailable=reason
        ):
            self._on_change()
        self._reading_keys = frozenset()

    async def _session(self) -> None:
        """One NVML initialisation: readings and events until NVML becomes unavailable."""
        self._uuids.update(await asyncio.to_thread(self._identities))
        async with asyncio.TaskGroup() as group:
            group.create_task(self._read_loop(), name=f"health readings {self._node_name}")
            group.create_task(self._event_loop(), name=f"health events {self._node_name}")

    def _identities(self) -> dict[int, str]:
        uuids: dict[int, str] = {}
        for gpu in range(self._nvml.device_count()):
            try:
                uuids[gpu] = self._nvml.identity(gpu).uuid
            except (GpuLostError, NvmlCallError):
                continue  # a lost GPU keeps the UUID learnt before, if any
        return uuids

    # -- readings -----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        previous: NodeReading | None = None
        while True:
            self._read_now.clear()
            started = time.perf_counter()
            try:
                reading = await asyncio.to_thread(read_node, self._nvml)
            except NvmlCallError as exc:
                self._metrics.errors.labels("health-nvml").inc()
                log.warning("reading failed", extra={"node": self._node_name, "error": str(exc)})
            else:
                if reading.unavailable is not None:
                    raise NvmlUnavailableError(reading.unavailable)
                self._metrics.readings.inc()
                self._metrics.reading_seconds.observe(time.perf_counter() - started)
                self._on_reading(reading, previous)
                previous = reading
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.read_interval_s):
                    await self._read_now.wait()

    def _on_reading(self, reading: NodeReading, previous: NodeReading | None) -> None:
        now = self._clock()
        sorted_out = triage(
            node_signals(reading, previous=previous),
            classifier=self._classifier,
            known=self._reading_keys,
        )
        for family, severity in sorted_out.counted:
            self._metrics.signals.labels(family, severity).inc()
        latched = False
        for fault in sorted_out.transient:
            latched = self._observations.latch(fault, now=now) or latched
        self._reading_keys = sorted_out.keys
        for gpu in reading.gpus:
            if gpu.errors:
                log.debug("some readings failed", extra={"gpu": gpu.index, "errors": gpu.errors})
        clique = node_clique([gpu.fabric for gpu in reading.gpus if gpu.fabric is not None])
        changed = self._observations.update_reading(
            sorted_out.state, clique=clique, gpu_count=len(reading.gpus)
        )
        lost = frozenset(gpu.index for gpu in reading.gpus if gpu.lost)
        if lost != self._lost:
            self._lost = lost
            self._resubscribe = True  # a GPU fell off or came back: register the ones there
        if not self._ready:
            log.info("NVML readable", extra={"node": self._node_name, "gpus": len(reading.gpus)})
        self._ready = True
        self._metrics.nvml_available.set(1)
        if changed or latched:
            self._on_change()

    # -- events -------------------------------------------------------------------------------

    async def _event_loop(self) -> None:
        while True:
            self._resubscribe = False
            try:
                async with subscribed(self._nvml) as subscription:
                    await self._deliver(subscription)
            except GpuLostError as exc:
                # NVML cannot unregister a lost GPU: a new subscription skips it.
                log.info("GPU lost; subscribing again", extra={"gpus": list(exc.gpus)})
                self._read_now.set()
            except NvmlCallError as exc:
                self._metrics.errors.labels("health-nvml").inc()
                log.warning(
                    "event subscription failed", extra={"node": self._node_name, "error": str(exc)}
                )
                await asyncio.sleep(self._settings.read_interval_s)

    async def _deliver(self, subscription: EventSubscription) -> None:
        """Hand the subscription's events on until the set of GPUs changes."""
        while True:
            if self._resubscribe:
                # Events already queued for the old set are not lost with it.
                for queued in await asyncio.to_thread(_drain, subscription):
                    self._on_event(queued)
                return
            event = subscription.next_event()
            if event is None:
                await asyncio.to_thread(subscription.wait, timeout_s=self._settings.event_wait_s)
            else:
                self._on_event(event)

    def _on_event(self, event: DeviceEvent) -> None:
        if event.kind in _READ_ON:
            self._read_now.set()
        signal = event_signal(event)
        if signal is None or not is_transient(signal):
            return  # a recovery action is a state: the reading it triggers reports it
        verdict = self._classifier.classify(signal)
        if verdict.ignored:
            return
        self._metrics.signals.labels(signal_family(signal), verdict.severity.value).inc()
        fault = fault_of(signal, verdict)
        if fault is not None and self._observations.latch(fault, now=self._clock()):
            self._on_change()
