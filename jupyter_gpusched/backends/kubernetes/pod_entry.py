"""The first process of a job's pod (standard library only: it is shipped in the job's ConfigMap, not installed).

    python /gpusched/input/gpusched_entry.py papermill IN OUT -f PARAMS ...

Kubernetes stops a pod (preempted, cancelled, past its deadline) with SIGTERM to the container's first process,
then SIGKILL after terminationGracePeriodSeconds. papermill as that process would not pass the signal on (as the
first process it does not even get it: it has no handler), and its kernel runs in a session of its own
(jupyter_client starts it so), so the checkpoint helper in the notebook would never save. So this wrapper runs the
command as its child and, on SIGTERM, sends $GPUSCHED_PREEMPT_SIGNAL (SIGTERM) to the process group of every
process below it that is not in its own group: the kernel's. The helper saves, the kernel ends, papermill writes
the notebook and exits. When no such group exists yet (the kernel is not up), the command itself gets the signal.

As the first process it also reaps orphans (what an init does), and exits with the command's exit code.
"""

import os
import signal
import subprocess
import sys


def preempt_signal() -> int:
    name = os.environ.get("GPUSCHED_PREEMPT_SIGNAL", "SIGTERM").strip().upper()
    try:
        return int(signal.Signals[name if name.startswith("SIG") else "SIG" + name])
    except KeyError:
        return int(signal.SIGTERM)


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group), from /proc (Linux; {} elsewhere)."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
            table[int(entry)] = (int(fields[1]), int(fields[2]))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return table


def kernel_groups(root: int) -> list:
    """The process groups, other than this process's own, of the processes below `root` (the kernels')."""
    table = process_table()
    below, frontier = set(), [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in table.items():
            if ppid == parent and pid not in below:
                below.add(pid)
                frontier.append(pid)
    own = os.getpgrp()
    return sorted({table[pid][1] for pid in below if table[pid][1] not in (own, 0)})


def forward(child: int) -> None:
    signum = preempt_signal()
    groups = kernel_groups(child)
    for group in groups:
        try:
            os.killpg(group, signum)
        except OSError:
            pass
    if not groups:
        try:
            os.kill(child, signum)
        except OSError:
            pass
    print(f"gpusched: stopping: signal {signum} to {'groups ' + str(groups) if groups else 'the command'}", flush=True)


def exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def main(argv: list) -> int:
    if not argv:
        print("usage: gpusched_entry.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    child = subprocess.Popen(argv).pid
    signal.signal(signal.SIGTERM, lambda signum, frame: forward(child))
    while True:
        try:
            pid, status = os.waitpid(-1, 0)  # any child: orphans given to the first process are reaped too
        except ChildProcessError:
            return 1  # (not reached: the command is our child until we have its status)
        if pid == child:
            return exit_code(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
