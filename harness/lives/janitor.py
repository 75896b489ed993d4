"""A temporary directory removed even when the process using it is SIGKILLed mid-use.

The fork server's warm-up life (``harness.lives.warmup``) and ``crashmatrix run``'s scratch
directory (``harness.front.cli``) use it. The warm-up life runs in a temporary directory under
$TMPDIR while the server starts. The server dies by SIGKILL: the harness stops it so at exit
(a SIGINT or SIGTERM of the run included), and the kernel kills it with a SIGKILLed harness
(``parent_death``). Killed during its warm-up, it left ``crashmatrix-warmup-*`` behind (2 in 5
runs of ``crashmatrix run`` SIGTERMed as the warm-up began; the interrupt tests look for
nothing in $TMPDIR).

So a janitor owns the directory: a child forked first, in a session of its own (a Ctrl-C or a
SIGTERM to the run's process group does not reach it), makes the directory, tells its path,
and waits on a pipe only its maker writes to. End of file comes when the block ends or the
maker dies, however it dies; the janitor then removes the directory and exits. The directory
exists only while a janitor stands by it: there is no moment a kill could leave it behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

__all__ = ["temporary_directory"]


@contextlib.contextmanager
def temporary_directory(prefix: str) -> Iterator[str]:
    """A new directory under $TMPDIR named ``prefix...``, removed when the block ends or when
    this process dies inside it. Forks one child for the block's duration."""
    hold_r, hold_w = os.pipe()  # the maker holds the write end: its end of file is the signal
    path_r, path_w = os.pipe()  # the janitor tells the directory's path on it
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the janitor, in its own process
        try:
            os.setsid()
            # Nothing of the maker's kept open but these two ends: not the hold's write end (no
            # end of file otherwise), the maker's listening socket, nor the stdout a harness's
            # caller reads to its end.
            keep = sorted((hold_r, path_w))
            os.closerange(0, keep[0])
            os.closerange(keep[0] + 1, keep[1])
            os.closerange(keep[1] + 1, os.sysconf("SC_OPEN_MAX"))
            path = ""
            with contextlib.suppress(OSError):
                path = tempfile.mkdtemp(prefix=prefix)
            os.write(path_w, os.fsencode(path) + b"\n")  # "" and a newline: it could not
            os.close(path_w)
            while os.read(hold_r, 1):
                pass
            # A maker killed mid-run may leave processes of its own dying a moment later, still
            # creating files behind the walk (a SIGKILLed ``crashmatrix run``'s lives): walked
            # again until nothing is left, for a few seconds at most.
            for _ in range(100 if path else 0):
                shutil.rmtree(path, ignore_errors=True)
                if not os.path.lexists(path):
                    break
                time.sleep(0.05)
        finally:
            os._exit(0)
    os.close(hold_r)
    os.close(path_w)
    try:
        with open(path_r, "rb") as told:  # one line, then the janitor closes its end
            path = os.fsdecode(told.readline().rstrip(b"\n"))
        if not path:
            raise OSError(f"the janitor could not make a directory {prefix}* under {tempfile.gettempdir()}")
        yield path
    finally:
        os.close(hold_w)  # the janitor's end of file: it removes the directory and exits
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
