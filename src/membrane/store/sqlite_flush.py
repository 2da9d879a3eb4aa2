"""Group commit for ``SQLiteStore``: commits are made durable off the event loop.

The store's own connection (the one the event loop uses) commits under WAL with
``synchronous=NORMAL`` and ``wal_autocheckpoint=0``: a ``COMMIT`` writes its frames to the
``-wal`` file (the OS page cache) and returns without an ``fsync``, so a process that is killed
afterwards loses nothing. A ``Flusher`` is one thread per store that makes those frames
durable: it ``fsync``\\ s the WAL once for every commit made since its last pass (one sync for a
whole batch), then wakes whoever waits on ``barrier()``. It also runs the checkpoints, on a
connection of its own whose ``synchronous=FULL`` syncs the WAL before copying it into the
database and the database after, so the loop never runs one.

Under ``full``, the places that acknowledge to the outside await ``barrier()`` (see
``Store.barrier``): it returns once every commit made before the call is on disk, so what was
acknowledged survives a power loss, as it did when every ``COMMIT`` synced. Under ``normal``
nobody waits and the flusher syncs only at its checkpoints, which is what ``normal`` always
promised (a commit survives the process, the last ones may be lost with the machine).

Under ``full`` a sync is made when someone needs it: at once for a ``barrier()`` waiting on a
commit not yet synced, and otherwise within ``SYNC_DELAY`` of the oldest commit not yet synced
(what nobody waits for, such as a child's queued events, is on disk within that bound). A
commit made while another's sync is under way, and waited for by nobody, so joins the sync of
the next commit someone does wait for: one sync per acknowledged commit, not one per commit.
"At once" on asyncio is once the loop has run the tasks that were ready when the barrier was
asked for: tasks woken together (the children whose turns one sync made durable) commit and
ask in the same round, and one sync covers them all, where waking the thread at the first
barrier would spend a sync, and a pair of thread switches, per turn on a disk that syncs fast.
Barriers that come one at a time (a host starting children one after another) have nothing to
share: when the last sync released a single barrier and none waits, the next barrier wakes the
thread as it is asked, so its sync runs while the loop runs what is ready (the child the
previous start launched) instead of after it. A sync that releases several barriers puts the
next ones back on the round.

Each hand-off costs both threads a switch, so there are few: the thread is woken once per
round of barriers (not by a commit, unless it has parked: nothing unsynced for a whole
``SYNC_DELAY``; until then it looks by itself within the delay), and it wakes each loop once
per sync, however many barriers wait there.

One fsync stays on the writer: SQLite syncs the WAL *header* when a writer starts the log
again after a checkpoint has copied all of it (the guard against an out-of-order write that
would bring old frames back). The flusher checkpoints only every ``checkpoint_commits``
commits, so that is one small sync per checkpoint cycle instead of one per commit.

SQLite starts the log again only when the writer begins a transaction with the *whole* WAL
copied. A checkpoint on the flusher's thread runs while the store keeps committing, so under
steady writes it would never find the log complete, and the WAL would grow by every commit
for as long as the writes go on (each sync then extends the file, which costs the disk twice a
sync of pages it already has). So each checkpoint ends with a second pass under the store's
writer lock (``writer``): it copies only what was committed during the first, and leaves the
log complete for the writer's next transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from membrane.errors import StoreError

__all__ = ["Flusher"]

_log = logging.getLogger("membrane.store")

#: Commits between two checkpoints: about SQLite's own default of 1000 WAL pages, since a
#: commit writes a few pages.
CHECKPOINT_COMMITS = 256

#: The longest, in seconds, a commit under ``full`` that no barrier waits for stays unsynced.
SYNC_DELAY = 0.05

#: How often, in seconds, a checkpoint waiting for the store's writer lock looks whether the
#: store is closing.
_WRITER_POLL = 0.01


class Flusher:
    """The durability thread of one store file.

    ``written()`` is called (by the store, on whatever thread commits) after every top-level
    ``COMMIT``; ``await barrier()`` returns once every commit counted before it is durable
    (at once when ``wait`` is false: the ``normal`` mode). ``fsync`` syncs a file descriptor
    (``os.fsync``; a test injects one that counts or stalls); it is only ever called on the
    flusher's thread. ``writer`` is the lock the store's own connection writes under; a
    checkpoint's last pass holds it (see the module). ``close()`` makes everything durable,
    checkpoints and stops the thread.
    """

    def __init__(
        self,
        path: Path,
        *,
        wait: bool,
        writer: threading.RLock | None = None,
        fsync: Callable[[int], object] = os.fsync,
        checkpoint_commits: int = CHECKPOINT_COMMITS,
        timeout: float = 30.0,
        sync_delay: float = SYNC_DELAY,
    ) -> None:
        self._path = path
        self._wal = Path(f"{path}-wal")
        self._wait = wait
        self._writer = writer
        self._fsync = fsync
        self._checkpoint_commits = checkpoint_commits
        self._cond = threading.Condition()
        self._written = 0
        self._synced = 0
        #: The highest commit count a barrier waits for, and when the oldest unsynced commit
        #: was counted (``time.monotonic``): a sync is due once either asks for one.
        self._wanted = 0
        self._unsynced_since = 0.0
        #: The commit count the thread's current (or last) pass syncs up to.
        self._covered = 0
        self._sync_delay = sync_delay
        #: The thread waits with no deadline (nothing unsynced for a whole ``SYNC_DELAY``):
        #: only then does a commit have to wake it to start the clock.
        self._parked = False
        #: The last sync released one asyncio barrier alone: barriers come one at a time.
        self._alone = False
        #: The asyncio loops with a ``_kick`` scheduled (one per round of a loop).
        self._kicks: set[asyncio.AbstractEventLoop] = set()
        self._closing = False
        self._failure: StoreError | None = None
        #: Barriers waiting on an asyncio loop: (commit count, loop, future), in order.
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._fd: int | None = None
        try:
            self._conn = sqlite3.connect(
                str(path), timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path} for flushing: {exc}", path=str(path)) from exc
        self._thread = threading.Thread(
            target=self._run, name=f"membrane-flush:{path.name}", daemon=True
        )
        self._thread.start()

    # -- the writer's side (any thread) ------------------------------------------------------

    def written(self) -> None:
        """Count one more commit; never blocks on the disk. The thread is woken only when its
        plans change: under ``full`` by the first commit since its last sync when the thread
        is parked (it starts the ``SYNC_DELAY`` clock; a thread not parked looks by itself
        within the delay), under ``normal`` once a checkpoint is due (a wake-up per commit
        would cost the committing thread a switch for nothing)."""
        with self._cond:
            self._written += 1
            if self._wait:
                if self._written - self._covered == 1:
                    self._unsynced_since = time.monotonic()
                    if self._parked:
                        self._cond.notify_all()
            elif self._written - self._synced >= self._checkpoint_commits:
                self._cond.notify_all()

    async def barrier(self) -> None:
        """Return once every commit counted so far is durable (at once under ``normal``).

        Raises ``StoreError`` when the flusher could not sync (the disk failed): what was
        committed is then not known to be durable."""
        if not self._wait:
            return
        loop = asyncio.get_running_loop()  # Membrane runs on asyncio only
        with self._cond:
            target = self._written
            if self._synced >= target or self._failure is not None or self._closed():
                self._raise_failure()
                return
            if target > self._wanted:
                # A sync is due now, not at the end of the delay: a thread awake (syncing)
                # sees it when its pass ends. One waiting is woken at once when barriers come
                # one at a time; otherwise once the loop has run what is ready now, so that
                # the commits those tasks make before their own barriers join the same sync.
                self._wanted = target
                if self._alone and not self._waiters:
                    self._cond.notify_all()
                elif loop not in self._kicks:
                    self._kicks.add(loop)
                    loop.call_soon(self._kick, loop)
            # The flusher wakes the loop itself: no worker thread in between.
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((target, loop, future))
        await future
        with self._cond:
            self._raise_failure()

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake the thread for the barriers of one round of ``loop`` (on that loop)."""
        with self._cond:
            self._kicks.discard(loop)
            if self._wanted > self._synced:
                self._cond.notify_all()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _closed(self) -> bool:
        return self._closing and not self._thread.is_alive()

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        since_checkpoint = 0
        while True:
            with self._cond:
                while not self._closing:
                    timeout = self._until_due()
                    if timeout is not None and timeout <= 0:
                        break
                    if timeout is None and self._wait and not self._parked:
                        # Nothing unsynced: look again within the delay before parking, so
                        # that while commits keep coming none has to wake the thread.
                        woken = self._cond.wait(self._sync_delay)
                        self._parked = not woken and self._written == self._synced
                        continue
                    self._cond.wait(timeout)
                self._parked = False
                target, closing = self._written, self._closing
                self._covered = target
            done = target - self._synced
            try:
                if done and self._wait:
                    self._sync_wal()
            except OSError as exc:
                with self._cond:
                    self._failure = StoreError(
                        f"the store {self._path} could not make its commits durable: {exc}",
                        path=str(self._path),
                    )
                    self._cond.notify_all()
                    self._wake(None)
                return
            with self._cond:
                self._synced = target
                self._cond.notify_all()
                self._wake(target)
            since_checkpoint += done
            if closing or since_checkpoint >= self._checkpoint_commits:
                self._checkpoint()
                since_checkpoint = 0
            if closing:
                with self._cond:
                    if self._synced == self._written:
                        return

    def _until_due(self) -> float | None:
        """Seconds until the next pass is due (0 or less: now; ``None``: when woken). Called
        with the condition held."""
        unsynced = self._written - self._synced
        if not unsynced:
            return None
        if not self._wait:
            return 0.0 if unsynced >= self._checkpoint_commits else None
        if self._wanted > self._synced:
            return 0.0
        return self._unsynced_since + self._sync_delay - time.monotonic()

    def _sync_wal(self) -> None:
        """``fsync`` the WAL file: every frame written before it reached the disk. The file is
        opened once and kept; ``_checkpoint`` looks whether SQLite replaced it (while the
        store's own connection is open SQLite keeps the file and writes it again from its
        start, so that is the one place a new file could appear)."""
        fd = self._fd
        if fd is None:
            try:
                fd = self._fd = os.open(self._wal, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return  # no WAL: every commit is already in the database file
        self._fsync(fd)

    def _checkpoint(self) -> None:
        """Copy the WAL into the database, as far as readers allow (``PASSIVE``: it never
        waits for, nor blocks, the writer); SQLite syncs both files around it. A checkpoint
        that fails (another process holds the file) is tried again at the next one: the WAL
        only grows meanwhile, nothing is lost."""
        try:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            if self._hold_writer():
                try:  # the commits made during the first pass: a few frames
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                finally:
                    self._writer.release()  # type: ignore[union-attr]
        except sqlite3.Error as exc:
            _log.warning("a checkpoint of %s failed, to be tried again: %s", self._path, exc)
        fd = self._fd
        if fd is not None and os.fstat(fd).st_ino != _inode(self._wal):
            os.close(fd)  # replaced: the next sync opens the file under the name
            self._fd = None

    def _hold_writer(self) -> bool:
        """Take the store's writer lock for a checkpoint's last pass; ``False`` when there is
        none, or the store is closing (``close()`` holds it while it waits for this thread,
        and nothing commits meanwhile)."""
        writer = self._writer
        if writer is None:
            return False
        while not writer.acquire(timeout=_WRITER_POLL):
            with self._cond:
                if self._closing:
                    return False
        with self._cond:
            closing = self._closing
        if closing:
            writer.release()
        return not closing

    def close(self) -> None:
        """Sync and checkpoint what was committed, then stop the thread (idempotent)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._conn.close()
        with self._cond:
            self._cond.notify_all()
            self._wake(None)

    def _wake(self, synced: int | None) -> None:
        """Wake the asyncio barriers whose commits are synced (all of them with ``None``: a
        failure or the end of the thread); called with the condition held."""
        waiting = self._waiters
        if not waiting:
            return
        if synced is None or waiting[-1][0] <= synced:
            done, self._waiters = waiting, []  # in order of their counts: all of them
        else:
            done = [w for w in waiting if w[0] <= synced]
            self._waiters = [w for w in waiting if w[0] > synced]
        self._alone = len(done) == 1
        # One wake-up per loop (a write to its self-pipe each), however many wait there.
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for _, loop, future in done:
            by_loop.setdefault(loop, []).append(future)
        for loop, futures in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, futures)


def _resolve(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():  # a cancelled barrier left its future
            future.set_result(None)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None
