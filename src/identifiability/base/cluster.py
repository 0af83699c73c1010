"""The Dask client a sweep or a cluster job runs on: a LocalCluster by default, any running scheduler by address.

A terminal's Ctrl-C goes to every process of its foreground process group, a LocalCluster's workers and
their chapters' kernels included. A worker that takes it dies mid-task with a traceback of its own (seen
in CI), so the LocalCluster starts its threads and worker processes with SIGINT blocked, which they
inherit; the command alone takes the Ctrl-C, reports it in one line (:mod:`identifiability.base.stops`) and
closes the cluster it made, which stops the workers (tests/integration/test_stops.py checks that nothing else is
printed and that no worker or kernel outlives the command).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from urllib.parse import urlsplit

from . import paths
from .errors import SweepError

# glibc's allocator for every process that computes (cluster workers and chapter kernels). Dask's default,
# MALLOC_TRIM_THRESHOLD_=65536, hands freed memory back to the kernel at once, and tensors above the mmap
# threshold come from a fresh mmap each time: a training step then spends much of its time in page faults.
# Serving everything from the heap and keeping what is freed for reuse shortens a family member's step, at the
# cost of a slightly higher peak memory (benchmarks/bench_allocator.py records the steps and page faults).
ALLOCATOR_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**34)}


def allocator_env() -> dict[str, str]:
    """:data:`ALLOCATOR_ENV`, except where this process's environment sets a variable itself (a user's choice)."""
    return {k: os.environ.get(k, v) for k, v in ALLOCATOR_ENV.items()}


def connect(scheduler: str | None = None, workers: int | None = None, timeout: float = 10.0, threads: int = 1):
    """A Dask client: to ``scheduler`` if given, else to a new LocalCluster with ``workers`` worker processes
    (default: one per core) that take one task at a time, each computing on ``threads`` threads."""
    import dask
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            if refused(scheduler):
                raise ConnectionRefusedError(scheduler)
            return Client(scheduler, timeout=timeout)
        except (OSError, TimeoutError) as e:
            raise SweepError(
                f"cannot reach the Dask scheduler at {scheduler} ({type(e).__name__}); start one with "
                "`dask scheduler` (and workers with `dask worker ADDRESS`), or leave out --scheduler for a local "
                "cluster"
            ) from None
    if workers is not None and workers < 1:
        raise SweepError(f"--workers must be at least 1, got {workers}")
    cluster = None
    # set before the workers are spawned (glibc reads them at start); ``env`` below is applied after
    spawn_env = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **allocator_env()}
    kept = kept_environ(spawn_env)
    try:
        preload = [*dask.config.get("distributed.worker.preload", []), __name__]  # dask_setup below, in each worker
        settings = {"distributed.nanny.pre-spawn-environ": spawn_env, "distributed.worker.preload": preload}
        with sigint_held(), dask.config.set(settings):
            cluster = LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                # the kernels a worker starts inherit these, and torch reads them at import
                env={k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
                # a worker's errors reach the client with its task; its routine notices would only
                # interleave with the progress bar
                silence_logs=logging.ERROR,
                # any free port: the default 8787 may be another cluster's (Dask then warns in four lines);
                # the address is printed when a dashboard answers there
                dashboard_address=":0",
            )
        cluster.kept_environ = kept  # close() restores it again: a worker Dask respawns writes it once more
        return Client(cluster)
    except BaseException:  # a Ctrl-C while the client connects: no worker outlives the command
        if cluster is not None:
            cluster.close()
        raise
    finally:
        restore_environ(kept)


def dask_setup(worker) -> None:
    """Run in each worker of a LocalCluster made by :func:`connect` as it starts, a respawned one included
    (Dask's worker preload). A Ctrl-C closes the cluster while a worker may be in the middle of its
    heartbeat; the worker then logged a 25-line traceback ("Failed to communicate with scheduler during
    heartbeat") under the command's one line (seen in a make test run). The scheduler of a LocalCluster lives
    in the command's own process, so a lost heartbeat only ever means the command is closing it."""
    logging.getLogger("distributed.worker").addFilter(not_a_lost_heartbeat)


def not_a_lost_heartbeat(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Failed to communicate with scheduler during heartbeat")


def kept_environ(keys) -> dict[str, str | None]:
    """This process's values of ``keys`` (None: unset), for :func:`restore_environ`. Dask's nanny writes its
    pre-spawn variables (OMP_NUM_THREADS=1 among them) into the environment of the process that starts the
    workers, so without this every kernel this command starts after a local cluster would compute on one
    thread (chapters 9 and 10 of a book build did, after chapter 9's control runs)."""
    return {k: os.environ.get(k) for k in keys}


def restore_environ(kept: dict[str, str | None]) -> None:
    for k, v in kept.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def refused(address: str) -> bool:
    """Whether a ``tcp://host:port`` address refuses a connection (nothing listens there), found at once:
    Dask's client retries a refused connection until its timeout (10 s), which a mistyped address should not
    cost. False for other schemes and for an address that accepts or does not answer (the client decides)."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        port = parts.port
    except ValueError:  # not a number: the client's own parsing reports it
        return False
    if parts.scheme != "tcp" or not parts.hostname or not port:
        return False
    try:
        socket.create_connection((parts.hostname, port), timeout=2.0).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False  # unresolvable or silent: the client's own attempt reports it
    return False


@contextlib.contextmanager
def sigint_held():
    """Block SIGINT in this thread while the body runs: threads and processes started meanwhile inherit the
    block (it survives fork and exec, and Python leaves the mask alone). A Ctrl-C meanwhile is not lost:
    a thread started earlier takes it, and Python raises it in this thread as usual; when no thread can,
    it stays pending and arrives as the body ends."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield  # only the main thread takes Python's SIGINT
        return
    from multiprocessing import resource_tracker

    # the tracker process, when first started, unblocks SIGINT in the thread that started it (Python's
    # multiprocessing); started here, before the block, it leaves the block alone
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def dashboard(client) -> str | None:
    """The dashboard address of the client's scheduler when its status page answers (the page needs
    ``bokeh`` on the scheduler's machine; without it the address serves nothing worth printing)."""
    import urllib.request

    link = client.dashboard_link
    try:
        with urllib.request.urlopen(link, timeout=2) as r:
            page = r.read(4096).lower() if r.status == 200 else b""
    except (OSError, ValueError):
        return None
    # without bokeh the scheduler still answers, with a page that says to install it
    return link if page and not (b"bokeh" in page and b"install" in page) else None


def local_data(client) -> str | None:
    """The client's data folder when its cluster runs on this machine (a LocalCluster: its workers share the
    caches), else None: a worker then uses its own."""
    return str(paths.data_root()) if getattr(client, "cluster", None) is not None else None


def close(client, own: bool) -> None:
    """Close ``client`` and its LocalCluster when this command made them (``own``); a client passed in is
    the caller's to close."""
    if own:
        cluster = client.cluster
        client.close()
        if cluster is not None:
            cluster.close()
            restore_environ(getattr(cluster, "kept_environ", {}))
