"""Agent programs in worker processes, off the trainer's interpreter.

An agent run's own Python work (the ``openai`` SDK building each request and reading each
reply into its types, the agent's tools and simulators) is several times the endpoint's work
per call: about 2.6 ms of CPU per call for the SDK alone, against about 1 ms for the server
(``bench/agents.py``). In the trainer's process it holds the same interpreter lock as the
server and the engine, so runs wait for each other's bookkeeping instead of the model.
``agent.workers=N`` runs them in ``N`` worker processes instead (``0``: threads of the
trainer's process), each running many runs at once in threads (an ``async`` agent: on the
worker's event loop).

A worker is a fresh interpreter (``python -m turnrl.agents.workers``, so a user's script is
never re-imported), connected to the trainer by a :mod:`multiprocessing.connection` socket
with a random key. It imports the agent by its ``module:function`` entry point with the
trainer's ``sys.path``, says it is ready (or why it cannot load the agent), then takes jobs
``(job, base_url, api_key, task)`` and answers each with the run's :class:`AgentResult` or
its error. A worker that dies fails the runs it held, with its exit code; the others go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any

from turnrl.agents.connection import is_connection_error
from turnrl.agents.program import (
    AgentError,
    RunFailed,
    agent_arguments,
    http_pool,
    load_agent,
    openai_client,
    to_result,
)

__all__ = ["AgentWorkers", "WorkerError"]

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a worker imports the agent's module (and what it imports)


class WorkerError(RunFailed):
    """An agent run failed in or with its worker (the message says how: the run's own error,
    or the worker's exit)."""


class AgentWorkers:
    """``processes`` worker processes running the agent ``entry_point``.

    Args:
        entry_point: ``module:function`` of the agent, importable with this ``sys.path``.
        processes: how many workers (runs are spread over them, fewest in flight first).
        http_timeout_s: the timeout of the runs' HTTP clients (None: 600 s).
    """

    def __init__(self, entry_point: str, processes: int, *,
                 http_timeout_s: float | None = None) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.entry_point = entry_point
        self._lock = threading.Lock()
        self._jobs = itertools.count()
        # job -> (worker index, loop, future) of the runs in flight
        self._pending: dict[int, tuple[int, asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._workers: list[_Worker] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="turnrl-agent-workers-")
        address = str(Path(self._tmp.name) / "socket")
        authkey = secrets.token_bytes(32)
        try:
            with Listener(address, family="AF_UNIX", authkey=authkey) as listener:
                for index in range(processes):
                    self._workers.append(_Worker.start(index, listener, address, authkey,
                                                       entry_point, http_timeout_s))
            for worker in self._workers:
                worker.reader = threading.Thread(target=self._read, args=(worker,),
                                                 name=f"turnrl-agent-worker-{worker.index}",
                                                 daemon=True)
                worker.reader.start()
        except BaseException:
            self.close()
            raise

    async def call(self, base_url: str, api_key: str, task: Any) -> Any:
        """Run the agent once in a worker; its :class:`AgentResult`, or raise its error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            alive = [w for w in self._workers if w.alive]
            if not alive:
                raise WorkerError("every agent worker process has exited")
            worker = min(alive, key=lambda w: w.in_flight)
            job = next(self._jobs)
            self._pending[job] = (worker.index, loop, future)
            worker.in_flight += 1
            try:
                worker.conn.send((job, base_url, api_key, task))
            except Exception as error:  # a task that cannot be pickled, a closed pipe
                self._pending.pop(job)
                worker.in_flight -= 1
                raise WorkerError(f"cannot send the task to agent worker {worker.index}: "
                                  f"{type(error).__name__}: {error}") from None
        try:
            return await future
        finally:  # resolved, or given up on (a timeout): the worker's answer is dropped
            with self._lock:
                if self._pending.pop(job, None) is not None:
                    worker.in_flight -= 1

    def close(self) -> None:
        """Stop the workers (a run still going is ended with its process) and remove the
        socket (idempotent)."""
        for worker in self._workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        for worker in self._workers:
            worker.stop()
        self._workers = []
        self._tmp.cleanup()

    def _read(self, worker: _Worker) -> None:
        """Hand each answer of ``worker`` to its run's future; fail its runs if it dies."""
        while True:
            try:
                job, ok, value = worker.conn.recv()
            except (EOFError, OSError):
                break
            except Exception as error:  # an answer that cannot be unpickled here
                log.warning("agent worker %d sent an unreadable answer: %s", worker.index,
                            error)
                continue
            self._settle(job, value if ok else WorkerError(value[0], connection=value[1]))
        worker.alive = False
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(1)
        code = worker.process.returncode
        with self._lock:
            lost = [job for job, (index, _, _) in self._pending.items()
                    if index == worker.index]
        for job in lost:
            self._settle(job, WorkerError(f"agent worker process {worker.index} exited (code "
                                          f"{code}) during the run"))

    def _settle(self, job: int, value: Any) -> None:
        with self._lock:
            entry = self._pending.get(job)
        if entry is None:  # given up on already
            return
        _, loop, future = entry

        def settle() -> None:
            if not future.done():
                if isinstance(value, BaseException):
                    future.set_exception(value)
                else:
                    future.set_result(value)

        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle)


class _Worker:
    """One worker process and its connection."""

    def __init__(self, index: int, process: subprocess.Popen, conn: Connection) -> None:
        self.index, self.process, self.conn = index, process, conn
        self.in_flight, self.alive = 0, True
        self.reader: threading.Thread | None = None

    @classmethod
    def start(cls, index: int, listener: Listener, address: str, authkey: bytes,
              entry_point: str, http_timeout_s: float | None) -> _Worker:
        env = {**os.environ, "TURNRL_AGENT_WORKER": address, "OMP_NUM_THREADS": "1",
               "TURNRL_AGENT_WORKER_KEY": authkey.hex()}
        process = subprocess.Popen([sys.executable, "-m", "turnrl.agents.workers"], env=env,
                                   stdin=subprocess.DEVNULL)
        conn = _accept(listener, process)
        try:
            conn.send((entry_point, list(sys.path), http_timeout_s))
            ready = conn.recv() if conn.poll(START_TIMEOUT_S) else (
                False, f"did not load the agent within {START_TIMEOUT_S:g} s")
        except (EOFError, OSError):
            ready = (False, f"exited (code {process.wait(5)}) while loading the agent")
        worker = cls(index, process, conn)
        if not ready[0]:
            worker.stop()
            raise AgentError(f"agent worker process {index}: {ready[1]}")
        return worker

    def stop(self) -> None:
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self.conn.close()
        if self.reader is not None and self.reader is not threading.current_thread():
            self.reader.join(5)


def _accept(listener: Listener, process: subprocess.Popen) -> Connection:
    """The connection of the worker just started (it dies before connecting: an error)."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(listener.accept()), daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.1)
        if process.poll() is not None and thread.is_alive():
            raise AgentError(f"an agent worker process exited (code {process.returncode}) "
                             "before connecting")
    return result[0]


# ------------------------------------------------------------------ the worker's side

def worker_main() -> None:
    """A worker process: load the agent, then run jobs until told to stop."""
    from multiprocessing.connection import Client

    address = os.environ["TURNRL_AGENT_WORKER"]
    conn = Client(address, family="AF_UNIX",
                  authkey=bytes.fromhex(os.environ["TURNRL_AGENT_WORKER_KEY"]))
    entry_point, path, http_timeout_s = conn.recv()
    sys.path[:] = path
    try:
        agent = load_agent(entry_point)
        run = _Runs(agent, entry_point, conn, http_timeout_s)
    except Exception as error:
        conn.send((False, f"{type(error).__name__}: {error}"))
        return
    conn.send((True, None))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            break
        if job is None:
            break
        run.start(*job)
    run.close()


class _Runs:
    """The runs of one worker: each sync run in a daemon thread, async ones on a loop."""

    def __init__(self, agent: Callable[..., Any], name: str, conn: Connection,
                 http_timeout_s: float | None) -> None:
        self.agent, self.conn = agent, conn
        self.arguments = agent_arguments(agent, name)
        self.is_async = asyncio.iscoroutinefunction(agent)
        self.timeout = http_timeout_s
        self._send_lock = threading.Lock()
        self._http: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        if self.is_async:
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def start(self, job: int, base_url: str, api_key: str, task: Any) -> None:
        if self.loop is not None:
            future = asyncio.run_coroutine_threadsafe(self._run_async(base_url, api_key, task),
                                                      self.loop)
            future.add_done_callback(lambda f: self._answer(job, f.result))
        else:
            threading.Thread(target=lambda: self._answer(
                job, lambda: self.agent(*self._args(base_url, api_key, task))),
                daemon=True).start()

    async def _run_async(self, base_url: str, api_key: str, task: Any) -> Any:
        return await self.agent(*self._args(base_url, api_key, task))

    def _answer(self, job: int, run: Callable[[], Any]) -> None:
        try:
            answer = (job, True, to_result(run()))
        except BaseException as error:  # the run's failure, reported as the trainer's error
            answer = (job, False, (f"{type(error).__name__}: {error}",
                                   is_connection_error(error)))
        with self._send_lock:
            try:
                self.conn.send(answer)
            except (OSError, ValueError):  # the trainer is gone
                pass
            except Exception as error:  # e.g. an info value that cannot be pickled
                with contextlib.suppress(OSError, ValueError):
                    self.conn.send((job, False, (f"the run's result cannot be sent back "
                                                 f"from its worker process: {error}", False)))

    def _args(self, base_url: str, api_key: str, task: Any) -> list[Any]:
        given = {"base_url": base_url, "api_key": api_key, "task": task}
        if "client" in self.arguments:
            given["client"] = self._client(base_url, api_key)
        return [given[name] for name in self.arguments]

    def _client(self, base_url: str, api_key: str) -> Any:
        with self._send_lock:
            if self._http is None:
                self._http = http_pool(asynchronous=self.is_async)
        return openai_client(base_url, api_key, self._http, asynchronous=self.is_async,
                             timeout_s=self.timeout)

    def close(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)


if __name__ == "__main__":
    worker_main()
