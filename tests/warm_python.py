"""``python -c CODE ARGS`` in a fresh process, without paying the heavy imports each time.

The README, docs and card blocks each run alone in a fresh interpreter (tests/test_readme.py,
tests/test_cards.py): about 60 interpreters, each spending 7 s idle (13 s on a busy CI core) on
importing torch, transformers and evaluate before its first line does anything. Here one warm
interpreter imports those third-party libraries once, under the very environment the blocks get,
and forks a child per run. The child is what ``python -c`` would be from that point on: a new
``__main__`` module, ``sys.argv == ["-c", *ARGS]``, ``sys.path[0] == ""``, its own folder,
stdin from /dev/null, stdout and stderr to files, its own process group, and a normal interpreter
exit (atexit handlers, non-daemon threads joined). moverkit itself is imported by the child, as
in a fresh process. What the warm imports wrote to stderr is put before each child's stderr.

Forking is safe only while the warm interpreter runs no other thread of its own and has run no
parallel torch region: ``serve`` runs no torch operation, and a warm interpreter with any thread
besides its main one and pyarrow's jemalloc purger (jemalloc forks safely: it takes its locks
around a fork, as every ``datasets.map(num_proc=...)`` relies on) is not used. A run whose environment differs
from the warm one's restarts it: libraries read their variables at import. The keys of
:data:`CHILD_ONLY_KEYS`, which only the code that runs reads, are not compared (the child still
gets them). :meth:`WarmPython.start` starts a child without waiting for it, so that several run
at once (the ranks of a ``torch.distributed`` job).

Run as a script, this file is the warm interpreter (one JSON request a line on stdin).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# The third-party libraries the blocks import (moverkit.load, the CLI, the examples).
WARM_IMPORTS = (
    "torch",
    "transformers",
    "evaluate",
    "datasets",
    "sentence_transformers",
    "ot",
    "scipy.stats",
    "sacrebleu",
)


CHILD_ONLY_KEYS = frozenset({"PYTEST_CURRENT_TEST", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
"""Environment keys no library reads at import: pytest's current test (it changes with every test)
and ``torch.distributed``'s rendezvous (read by ``init_process_group``)."""


def _run_child(request: dict) -> None:
    """In the forked child: become ``python -c CODE ARGS`` and run it; never returns."""
    import builtins
    import types

    os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_APPEND), fd)
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = ["-c", *request["args"]]
    sys.path[0] = ""
    try:
        exec(compile(request["code"], "<string>", "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as error:
        error = error.with_traceback(error.__traceback__.tb_next)  # the traceback from the code on
        sys.excepthook(type(error), error, error.__traceback__)
        raise SystemExit(1) from None
    raise SystemExit(0)


def serve() -> None:
    """The warm interpreter: import, then fork one child per request line of stdin."""
    for name in WARM_IMPORTS:
        __import__(name)
    threads = [Path(f"/proc/self/task/{task}/comm").read_text().strip() for task in os.listdir("/proc/self/task")]
    others = [name for name in threads if name != "jemalloc_bg_thd"]
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # a child's stray write never reaches the replies
    replies.write(json.dumps({"ready": True, "threads": others}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if "wait" in request:  # a child started earlier: its exit code once it ends
            _, status = os.waitpid(request["wait"], 0)
            replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            replies.close()
            _run_child(request)
        replies.write(json.dumps({"pid": pid}) + "\n")


def offline_environment() -> dict:
    """The environment the README, docs and card blocks run in: this process's, with the Hugging
    Face libraries offline (one environment, so one warm interpreter serves them all)."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _compared(env: dict | None) -> dict | None:
    return env and {key: value for key, value in env.items() if key not in CHILD_ONLY_KEYS}


class WarmRun:
    """A started ``python -c`` (forked, or a fresh process where forking was refused):
    ``wait(timeout)`` answers like ``subprocess.run(..., capture_output=True, text=True)``."""

    def __init__(self, python: WarmPython, args: list[str], out: Path, err: Path, pid=None, process=None) -> None:
        self._python, self.args, self._out, self._err = python, args, out, err
        self._pid, self._process = pid, process

    def wait(self, timeout: float) -> subprocess.CompletedProcess:
        prefix = ""
        if self._process is not None:
            try:
                returncode = self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                raise
        else:
            returncode = self._python._wait(self._pid, self.args, timeout)
            prefix = self._python._import_stderr
        stdout, stderr = (path.read_text(encoding="utf-8", errors="replace") for path in (self._out, self._err))
        self._out.unlink()
        self._err.unlink()
        return subprocess.CompletedProcess(self.args, returncode, stdout, prefix + stderr)


class WarmPython:
    """``run(args, cwd, env, timeout)`` for ``args == [sys.executable, "-c", CODE, *ARGS]``,
    answered like ``subprocess.run(..., capture_output=True, text=True)``; ``start(args, cwd,
    env)`` the same without waiting (:class:`WarmRun`)."""

    def __init__(self, folder: Path) -> None:
        self._server: subprocess.Popen | None = None
        self._env: dict | None = None
        self._folder = folder
        self._import_stderr = ""
        self._unread = b""  # reply bytes read from the pipe, not yet a whole line

    def _start(self, env: dict) -> None:
        """The warm interpreter for ``env``; none (``_server`` None) where forking it is unsafe."""
        self.close()
        errors = self._folder / "server-stderr.txt"
        with open(errors, "w") as stderr:
            self._server = subprocess.Popen(
                [sys.executable, __file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                bufsize=0,
            )
        self._unread = b""
        ready = self._reply(timeout=300)
        self._import_stderr = errors.read_text(encoding="utf-8", errors="replace")
        self._env = env
        if ready is None or len(ready["threads"]) != 1:  # forking a threaded process is not safe
            self.close()

    def _reply(self, timeout: float) -> dict | None:
        """The next reply line, read from the pipe itself (select sees no line a buffer holds)."""
        fd = self._server.stdout.fileno()
        while b"\n" not in self._unread:
            readable, _, _ = select.select([fd], [], [], timeout)
            chunk = os.read(fd, 65536) if readable else b""
            if not chunk:
                return None
            self._unread += chunk
        line, self._unread = self._unread.split(b"\n", 1)
        return json.loads(line)

    def run(self, args: list[str], cwd, env: dict, timeout: float) -> subprocess.CompletedProcess:
        return self.start(args, cwd, env).wait(timeout)

    def start(self, args: list[str], cwd, env: dict) -> WarmRun:
        assert args[:2] == [sys.executable, "-c"], args
        if _compared(env) != _compared(self._env):
            self._start(env)
        out, err = (Path(tempfile.mkstemp(dir=self._folder, suffix=s)[1]) for s in (".out", ".err"))
        if self._server is not None:
            request = {
                "code": args[2],
                "args": args[3:],
                "cwd": str(cwd),
                "env": env,
                "stdout": str(out),
                "stderr": str(err),
            }
            self._server.stdin.write(json.dumps(request).encode() + b"\n")
            forked = self._reply(timeout=60)
            if forked is not None:
                return WarmRun(self, args, out, err, pid=forked["pid"])
            self.close()  # the warm interpreter is gone: a fresh process instead
        with open(out, "w") as stdout, open(err, "w") as stderr:  # refused or gone, for this environment
            process = subprocess.Popen(
                args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True
            )
        return WarmRun(self, args, out, err, process=process)

    def _wait(self, pid: int, args: list[str], timeout: float) -> int:
        """The exit code of the forked child ``pid``; on a timeout its process group is killed."""
        done = None
        if self._server is not None:  # else closed by another run's timeout, with its children
            self._server.stdin.write(json.dumps({"wait": pid}).encode() + b"\n")
            done = self._reply(timeout=timeout)
        if done is None:
            with contextlib.suppress(ProcessLookupError):  # ended, and reaped by init once the warm one was gone
                os.killpg(pid, signal.SIGKILL)
            self.close()
            raise subprocess.TimeoutExpired(args, timeout)
        return done["returncode"]

    def close(self) -> None:
        if self._server is not None:
            self._server.kill()
            self._server.wait()
            self._server = None


if __name__ == "__main__":
    serve()
