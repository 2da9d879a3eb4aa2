"""Run leases and the sweeper: which process drives a run, and the clean-up no one else does.

**Leases.** A run being driven holds a lease in the store (``run_leases``: ``owner``,
``expires_at``). The runtime claims it when it publishes a run (in the publication's
transaction) or before it resumes one; ``Leases.claim`` refuses a run whose lease another owner
holds and has not let expire (``RunLeased``, naming the owner), and takes over an expired one,
or one whose owner is certainly dead (a process of this host that no longer runs:
``durable.owners``). The sweeper renews every lease its owner holds, in one statement, every
third of ``lease_seconds``; a run whose lease this owner no longer holds (it stalled past the
expiry and another process took the run over) is stopped, so two processes never drive one run.
A run's end releases its lease; a closing runtime releases the rest.

**The sweep** runs once when the sweeper starts and then every ``sweep_interval_seconds``:

1. it reaps pending receipts whose owner is certainly dead (``durable.owners.judge``: same
   host, and that process no longer runs) and, of owners it cannot judge (another host, no
   owner recorded), those older than ``receipt_ttl_seconds`` (15 minutes): their action never
   completed, so a retry of the ``request_id`` acts again. A live owner's receipt is never
   reaped: it is left to that process, and until it settles it a retry is ``request-pending``;
2. it reconciles interrupted runs: the leases of an owner that is certainly dead
   (``durable.owners``) count as expired at once, and for each expired lease it takes it over
   (so two sweepers never reconcile one run) and, when the run's stored status is still
   ``queued`` or ``running``, in one transaction marks it ``interrupted`` (a ``resume``
   continues it), fails its lineage edge as ``interrupted`` with a summary, writes an
   ``interrupted`` event and a ``status`` delivery for its parent (the outbox brings it to the
   parent, now or when it is resumed), then drops the lease. A run a queue's worker was
   driving (its header's provider is ``dbos``) is handed off instead when the sweeper has a
   ``handoff``: one transaction marks it ``queued`` again, appends a ``handed_off`` event
   naming the owner that stopped renewing, and lets the lease lapse at once (kept, so the
   next claim raises its generation); then ``handoff(run_id)``
   queues its workflow again, and another worker goes on with it from its stored
   conversation.

``Sweeper.run()`` lives in a task group until ``stop()``; the runtime runs one, and so can
``membrane serve`` for a store no runtime has open (it then leases no run of its own).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio

from membrane.config.values import Settings
from membrane.durable.outbox import OutboxDrainer
from membrane.durable.owners import gone, judge, new_owner
from membrane.errors import RunLeased, StoreError
from membrane.store.base import Lease, Store

__all__ = ["Leases", "SweepReport", "Sweeper", "new_owner"]

#: Stored statuses of a run some process is (or was) driving: anything else has ended.
_DRIVEN: Final = frozenset({"queued", "running"})
#: The provider whose runs a queue's workers drive (``runtime.providers.dbos``).
QUEUED_PROVIDER: Final = "dbos"
#: The owner of a handed-off run's lapsed lease until a worker takes it: no process.
HANDED_OFF: Final = "queue:handed-off"
_SUMMARY: Final = 500


class Leases:
    """The leases one owner (one runtime) takes on runs in ``store``."""

    def __init__(self, store: Store, *, owner: str, ttl: float) -> None:
        self.store = store
        self.owner = owner
        self.ttl = ttl
        #: The generation of each lease this owner claimed (``fence`` checks it is still in
        #: force before a run's end is written).
        self._generations: dict[str, int] = {}

    def claim(self, run_id: str) -> Lease:
        """Hold ``run_id``'s lease, or raise ``RunLeased`` when another owner's is live."""
        lease = self.store.claim_lease(run_id, owner=self.owner, ttl=self.ttl)
        if lease.owner != self.owner and gone(lease.owner):
            # Its holder died (a process of this host that no longer runs): take it now.
            self.store.expire_owner_leases(lease.owner)
            lease = self.store.claim_lease(run_id, owner=self.owner, ttl=self.ttl)
        if lease.owner != self.owner:
            raise RunLeased(
                f"run {run_id!r} is being driven by {lease.owner} (its lease runs until "
                f"{time.strftime('%H:%M:%S', time.localtime(lease.expires_at))}); wait for it "
                "to end, or for its lease to expire if that process died",
                run_id=run_id,
                owner=lease.owner,
                expires_at=lease.expires_at,
            )
        self._generations[run_id] = lease.generation
        return lease

    def release(self, run_id: str) -> None:
        self._generations.pop(run_id, None)
        self.store.release_lease(run_id, owner=self.owner)

    def end(self, run_id: str) -> None:
        """Drop ``run_id``'s lease as the last write of its end, fenced: ``RunLeased`` (and
        the enclosing transaction's writes refused with it) when this owner no longer holds
        it at the generation it claimed, because a stall past the lease let another owner
        take the run over. A run this owner never claimed is only released."""
        generation = self._generations.pop(run_id, None)
        if generation is None:
            self.store.release_lease(run_id, owner=self.owner)
        else:
            self.store.end_lease(run_id, owner=self.owner, generation=generation)

    @contextlib.contextmanager
    def claimed(self, run_id: str, *, held: bool = False) -> Iterator[Lease | None]:
        """Hold ``run_id``'s lease for the block, which gets it (``held``: it is this owner's
        already, and the block gets ``None``); a block that raises releases a lease it
        claimed."""
        if held:
            yield None
            return
        asked = time.time()
        lease = self.claim(run_id)
        try:
            yield lease
        except BaseException:
            # Only a lease this block took is let go: one this owner held before it (another
            # call of this process resuming the run meanwhile) stays with that call.
            if lease.acquired_at >= asked:
                with contextlib.suppress(StoreError):
                    self.release(run_id)
            raise


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep did: the request ids reaped and the runs marked ``interrupted``."""

    reaped: tuple[str, ...]
    interrupted: tuple[str, ...]


class Sweeper:
    """Renews one owner's leases, reaps stale receipts and reconciles interrupted runs.

    ``leased()`` gives the runs this owner is driving now (their leases must stay held) and
    ``lost(run_id)`` stops driving one whose lease another owner took over (the runtime's runs
    table and scheduler; a sweeper without them leases nothing). ``deliver(recipient,
    payload)`` writes an outbox item inside the reconcile's transaction and ``offer(item_id,
    recipient, payload)`` hands it over afterwards (the runtime's outbox; without them the item
    is only written). ``commit(work)`` runs ``work`` in one transaction
    (default: ``store.transaction()``).
    """

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        receipt_ttl: float = 900.0,
        lease_seconds: float = 30.0,
        interval: float = 60.0,
        leased: Callable[[], Collection[str]] = tuple,
        lost: Callable[[str], None] = lambda run_id: None,
        deliver: Callable[[str, Mapping[str, Any]], int] | None = None,
        offer: Callable[[int, str, Mapping[str, Any]], None] | None = None,
        commit: Callable[[Callable[[], list[int]]], list[int]] | None = None,
        handoff: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.leases = Leases(store, owner=owner or new_owner(), ttl=lease_seconds)
        self._store = store
        self._receipt_ttl = receipt_ttl
        self._interval = interval
        self._leased = leased
        self._lost = lost
        self._deliver = deliver
        self._offer = offer
        self._commit = commit
        self._handoff = handoff
        self._clock = clock
        self._stopped = anyio.Event()
        #: Store failures met while sweeping (the next pass tries again).
        self.errors: list[StoreError] = []

    @classmethod
    def from_settings(
        cls,
        store: Store,
        settings: Settings,
        *,
        leased: Callable[[], Collection[str]],
        lost: Callable[[str], None],
        outbox: OutboxDrainer,
        commit: Callable[[Callable[[], list[int]]], list[int]],
        handoff: Callable[[str], bool] | None = None,
    ) -> Sweeper:
        """The sweeper of a runtime: its settings' TTLs, its runs, its outbox, and the queue
        a run of a lost worker goes back to (``handoff``)."""
        return cls(
            store,
            receipt_ttl=settings.receipt_ttl_seconds,
            lease_seconds=settings.lease_seconds,
            interval=settings.sweep_interval_seconds,
            leased=leased,
            lost=lost,
            deliver=outbox.deliver,
            offer=outbox.offer_item,
            commit=commit,
            handoff=handoff,
        )

    @property
    def owner(self) -> str:
        return self.leases.owner

    # -- one pass -------------------------------------------------------------------------------

    def renew(self) -> None:
        """Extend this owner's leases; stop driving any run whose lease was taken over."""
        held = set(self._store.renew_owner_leases(self.owner, ttl=self.leases.ttl))
        for run_id in list(self._leased()):
            if run_id not in held:
                self._lost(run_id)

    def sweep(self, *, now: float | None = None) -> SweepReport:
        """Reap stale receipts and reconcile runs whose lease expired, as of ``now``."""
        now = self._clock() if now is None else now
        judged: dict[str, list[str]] = {"gone": [], "alive": [], "unknown": []}
        for owner in self._store.pending_receipt_owners():
            judged[judge(owner)].append(owner)
        reaped = self._store.reap_pending_receipts(
            older_than=now - self._receipt_ttl, owners=judged["gone"], spare=judged["alive"]
        )
        for owner in self._store.lease_owners():
            if owner != self.owner and gone(owner):
                self._store.expire_owner_leases(owner)
        interrupted = []
        for lease in self._store.expired_leases(now=now):
            if self._reconcile(lease):
                interrupted.append(lease.run_id)
        return SweepReport(tuple(reaped), tuple(interrupted))

    def _reconcile(self, lease: Lease) -> bool:
        store = self._store
        taken = store.claim_lease(lease.run_id, owner=self.owner, ttl=self.leases.ttl)
        if taken.owner != self.owner:
            return False  # renewed, or another sweeper took it first
        header = store.get_header(lease.run_id)
        if header is None or header.status not in _DRIVEN:
            store.release_lease(lease.run_id, owner=self.owner)
            return False
        if self._handoff is not None and header.provider == QUEUED_PROVIDER:
            return self._hand_off(lease, again=header.status == "queued")
        summary = (
            f"interrupted: the process driving it ({lease.owner}) stopped renewing its lease; "
            "resume the run to continue it"
        )[:_SUMMARY]
        payload = {
            "kind": "status",
            "run_id": header.session_id,
            "agent": header.agent,
            "status": "interrupted",
            "summary": summary,
        }

        def work() -> list[int]:
            store.set_status(header.session_id, "interrupted")
            edges = store.edges(parent_id=header.parent_id) if header.parent_id else []
            edge = next((e for e in edges if e.child_id == header.session_id), None)
            if edge is not None and edge.status == "running":
                store.complete_edge(header.session_id, status="interrupted", result_summary=summary)
            store.append_event(
                header.session_id, "interrupted", {"owner": lease.owner, "summary": summary}
            )
            items = []
            if header.parent_id is not None:
                deliver = self._deliver or (lambda to, p: store.enqueue_outbox(to, dict(p)))
                items.append(deliver(header.parent_id, payload))
            store.release_lease(header.session_id, owner=self.owner)
            return items

        items = self._transaction(work)
        if self._offer is not None and header.parent_id is not None:
            for item_id in items:
                self._offer(item_id, header.parent_id, payload)
        return True

    def _hand_off(self, lease: Lease, *, again: bool) -> bool:
        """Give the run of ``lease`` (held now by this sweeper) back to its queue. ``again``:
        it was handed off before and no worker has taken it yet, so only the queue is asked
        (a no-op while its workflow waits there); nothing is written."""
        store, run_id = self._store, lease.run_id

        def work() -> list[int]:
            if not again:
                store.set_status(run_id, "queued")
                store.append_event(run_id, "handed_off", {"owner": lease.owner})
            # Kept, lapsed at once and held by no process (this owner's renewals would keep
            # it alive): the next driver's claim raises its generation past the stalled
            # one's, whose late writes the fence then refuses (a deleted lease would start
            # again at generation 1). Every later sweep sees it lapsed and asks again.
            store.claim_lease(run_id, owner=self.owner, ttl=0)
            store.claim_lease(run_id, owner=HANDED_OFF, ttl=0)
            return []

        self._transaction(work)
        assert self._handoff is not None
        try:
            self._handoff(run_id)
        except Exception as exc:
            # The next sweep asks again (the lease stays lapsed); meanwhile it is said here.
            self.errors.append(StoreError(f"run {run_id!r} could not be queued again: {exc}"))
            return False
        return not again

    def _transaction(self, work: Callable[[], list[int]]) -> list[int]:
        if self._commit is not None:
            return self._commit(work)
        with self._store.transaction():
            return work()

    # -- the task -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Sweep now and every ``interval`` seconds, renewing leases every third of their
        lifetime, until ``stop()``. Store failures are kept in ``errors``; the loop goes on."""
        tick = min(self._interval, self.leases.ttl / 3)
        next_sweep = self._clock()
        while not self._stopped.is_set():
            try:
                self.renew()
                if self._clock() >= next_sweep:
                    self.sweep()
                    next_sweep = self._clock() + self._interval
            except StoreError as exc:
                self.errors.append(exc)
            with anyio.move_on_after(tick):
                await self._stopped.wait()

    def stop(self) -> None:
        """End ``run()`` and drop every lease this owner still holds."""
        self._stopped.set()
        try:
            self._store.release_owner_leases(self.owner)
        except StoreError as exc:
            self.errors.append(exc)
