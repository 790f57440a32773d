"""Start-up, shutdown and failure handling of the parameter-server cluster.

- Every rank starts a real gRPC server (`tf.distribute.Server`) for its task.
- Workers wait (bounded by --ps-timeout) for the servers to accept connections and name those
  that never did.
- Every blocking operation in a session runs under `operation_timeout_in_ms`, so a step waiting
  on a dead or stuck peer fails within the timeout; the failure is turned into one message that
  names the task(s) that stopped answering.
- A server leaves `serve()` when every worker has dropped its index into the server's done queue
  (no `server.join()` forever); while it waits it checks, every few seconds, that the workers it
  has not heard from still accept connections, and fails naming the one that vanished.
"""

from __future__ import annotations

import re
import threading
import time

from archbench.common.errors import RunFailed
from archbench.ps import wire
from archbench.ps.cluster_spec import (
    NO_ANSWER,
    REFUSED,
    ClusterLayout,
    Task,
    probe,
    unreachable,
)

SERVE_POLL_S = 0.25  # how soon a server notices the last worker is done
LIVENESS_EVERY_S = 2.0  # how often a waiting task checks that its peers are still there
GONE_SETTLE_S = 3.0  # how long a lost connection waits for its peer's listening socket to close


def session_config(tf, threads: int, timeout_s: float, device_filters: list[str] | None):
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads,
        inter_op_parallelism_threads=threads,
        operation_timeout_in_ms=int(timeout_s * 1000),
        allow_soft_placement=False,
    )
    if device_filters:
        config.device_filters.extend(device_filters)
    return config


def start_server(tf, layout: ClusterLayout, threads: int):
    """This rank's gRPC server, listening on its port on every interface."""
    me = layout.me
    try:
        return tf.distribute.Server(
            tf.train.ClusterSpec(layout.tf_cluster()),
            job_name=me.job,
            task_index=me.index,
            protocol="grpc",
            config=tf.compat.v1.ConfigProto(
                intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads
            ),
            start=True,
        )
    except tf.errors.OpError as exc:
        raise RunFailed(
            f"could not start the gRPC server of {me.describe()}: {first_line(exc)}"
        ) from None


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The informative part of a TensorFlow error (e.g. "From /job:ps/...: Socket closed")."""
    text = getattr(exc, "message", None) or str(exc)
    stripped = (line.strip() for line in text.splitlines())
    lines = [
        line
        for line in stripped
        if line
        and line != "Graph execution error:"
        and not line.startswith(("Additional GRPC error", ":{", "[["))
    ]
    return (" ".join(lines[:2]) or type(exc).__name__)[:limit]


def bounded_call(function, timeout_s: float):
    """function() in a helper thread; TimeoutError when it has not returned in time.

    For calls TensorFlow does not bound itself: opening a session waits for every task in its
    device filters with no deadline. A call that never returns is left behind in its daemon
    thread; the process is about to fail anyway.
    """
    outcome: dict = {}

    def call() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=call, daemon=True, name="bounded-call")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def open_session(
    tf, target: str, graph, config, first_fetch, layout: ClusterLayout, doing: str, timeout_s: float
):
    """A session whose first run (which contacts every task it may use) is bounded in time."""
    session = tf.compat.v1.Session(target, graph=graph, config=config)
    try:
        bounded_call(lambda: session.run(first_fetch), timeout_s)
    except TimeoutError:
        others = [task for task in layout.tasks if task.rank != layout.rank]
        gone = unreachable(others, timeout=0.5)
        names = "; ".join(task.describe() for task in gone) or "a task"
        raise RunFailed(
            f"{names} did not answer within --ps-timeout {timeout_s:g} s while {doing}"
        ) from None
    except tf.errors.OpError as exc:
        raise explain_failure(tf, exc, layout, doing, timeout_s) from None
    return session


def explain_failure(
    tf, exc: Exception, layout: ClusterLayout, doing: str, timeout_s: float
) -> RunFailed:
    """A TensorFlow error during `doing` -> one message naming the task(s) that stopped answering."""
    others = [task for task in layout.tasks if task.rank != layout.rank]
    kind = type(exc).__name__
    lost_connection = isinstance(exc, (tf.errors.UnavailableError, tf.errors.AbortedError))
    gone = gone_tasks(others, settle_s=GONE_SETTLE_S if lost_connection else 0.0)
    if gone:
        names = "; ".join(task.describe() for task in gone)
        return RunFailed(f"{names} stopped answering while {doing} ({kind}: {first_line(exc)})")
    if isinstance(exc, tf.errors.DeadlineExceededError):
        return RunFailed(
            f"no progress within --ps-timeout {timeout_s:g} s while {doing}: every task still "
            "accepts connections, so one is stuck or slower than the timeout"
        )
    reporters = tasks_named_in(first_line(exc), others)
    if reporters:
        names = "; ".join(task.describe() for task in reporters)
        return RunFailed(f"{doing} failed: {names} reported {kind}: {first_line(exc)}")
    return RunFailed(f"{doing} failed: {kind}: {first_line(exc)}")


def gone_tasks(tasks: list[Task], settle_s: float) -> list[Task]:
    """The tasks that no longer accept connections, looking again for up to settle_s.

    A killed process resets its connections a moment before the kernel closes its listening
    socket (a large process takes a while to tear down), so the first look can find it still
    there.
    """
    deadline = time.monotonic() + settle_s
    while True:
        gone = unreachable(tasks, timeout=0.5)
        if gone or time.monotonic() >= deadline:
            return gone
        time.sleep(0.1)


def tasks_named_in(message: str, tasks: list[Task]) -> list[Task]:
    """The tasks a TensorFlow error says it came from ("From /job:ps/replica:0/task:0: ...")."""
    named = set(re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", message))
    return [task for task in tasks if (task.job, str(task.index)) in named]


def take_when_there(
    tf,
    session,
    queue_ops: tuple,
    watch,
    layout: ClusterLayout,
    doing: str,
    timeout_s: float,
    poll_s: float = 0.1,
):
    """One item from a queue (ops: size, dequeue), however long it takes to arrive, as long as
    the tasks that `watch()` names still accept connections; fails naming the first that left.

    The queue is polled with `size` and dequeued only once an item is there: a dequeue given
    up by a timeout could take the item and lose it on the way back.
    """
    size, dequeue = queue_ops
    next_check = time.monotonic() + LIVENESS_EVERY_S
    silent_since: dict[int, float] = {}  # rank -> when it first gave no answer in a row
    try:
        while session.run(size) == 0:
            if time.monotonic() >= next_check:
                _check_still_there(list(watch()), silent_since, doing, timeout_s)
                next_check = time.monotonic() + LIVENESS_EVERY_S
            time.sleep(poll_s)
        return session.run(dequeue)
    except tf.errors.OpError as exc:
        raise explain_failure(tf, exc, layout, doing, timeout_s) from None


def _check_still_there(
    tasks: list[Task], silent_since: dict[int, float], doing: str, timeout_s: float
) -> None:
    """Fails naming the tasks whose host refused the connection (the process is gone), or that
    gave no answer at all for longer than --ps-timeout; one unanswered look is not enough."""
    now = time.monotonic()
    refused, silent = [], []
    for task in tasks:
        answer = probe(task.address, timeout=1.0)
        if answer == NO_ANSWER:
            silent_since.setdefault(task.rank, now)
            if now - silent_since[task.rank] >= timeout_s:
                silent.append(task)
        else:
            silent_since.pop(task.rank, None)
            if answer == REFUSED:
                refused.append(task)
    if refused:
        names = "; ".join(task.describe() for task in refused)
        raise RunFailed(f"{names} exited while {doing}")
    if silent:
        names = "; ".join(task.describe() for task in silent)
        raise RunFailed(f"{names} did not answer for --ps-timeout {timeout_s:g} s while {doing}")


def serve_until_released(tf, session, queue_ops: tuple, layout: ClusterLayout, timeout_s: float):
    """Blocks until every worker has reported done; returns the order in which they did."""
    waiting = {task.index: task for task in layout.worker_tasks()}
    finished: list[int] = []
    while waiting:
        worker = int(
            take_when_there(
                tf,
                session,
                queue_ops,
                waiting.values,
                layout,
                f"{layout.me.describe()} waited for the workers to finish",
                timeout_s,
                poll_s=SERVE_POLL_S,
            )
        )
        waiting.pop(worker, None)
        finished.append(worker)
    return finished


def _gathered(item: bytes, tasks: int) -> tuple[int, object]:
    """(rank, value) of one task's allgather message; RunFailed for bytes no task of this job
    sent (anyone may reach the queue's port)."""
    try:
        rank, value = wire.loads_wire(item)
    except (wire.WireError, TypeError, ValueError) as exc:
        raise RunFailed(f"an allgather message that is not archbench's: {exc}") from None
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < tasks:
        raise RunFailed(f"an allgather message from rank {rank!r}, not one of {tasks} tasks")
    return rank, value


class GrpcAllgather:
    """allgather of small Python objects over the tasks' own gRPC servers (no MPI needed).

    Round r: every task puts (rank, value) as JSON (archbench.ps.wire: never pickle, since the
    port takes anyone's bytes) into a queue hosted by every task, then takes
    N items from the queue it hosts, waiting as long as the tasks it has not heard from are
    alive (the chief may be evaluating). Used when the cluster comes from TF_CONFIG.
    """

    def __init__(self, tf, layout: ClusterLayout, target: str, threads: int, timeout_s: float):
        self.tf = tf
        self.layout = layout
        self.target = target
        self.config = session_config(tf, threads, timeout_s, None)
        self.timeout_s = timeout_s
        self.round = 0

    def __call__(self, value) -> list:
        tf = self.tf
        self.round += 1
        tasks: list[Task] = self.layout.tasks
        me = self.layout.rank
        graph = tf.Graph()
        with graph.as_default():
            payload = tf.compat.v1.placeholder(tf.string, ())
            queues = []
            for task in tasks:
                with tf.device(task.device):
                    queues.append(
                        tf.queue.FIFOQueue(
                            len(tasks),
                            [tf.string],
                            shapes=[[]],
                            shared_name=f"archbench_allgather_{self.round}",
                        )
                    )
            touch_all = tf.group(*[queue.size() for queue in queues])
            send = tf.group(*[queue.enqueue(payload) for queue in queues])
            inbox = (queues[me].size(), queues[me].dequeue())
        doing = f"exchanging results between the tasks (round {self.round})"
        session = open_session(
            tf, self.target, graph, self.config, touch_all, self.layout, doing, self.timeout_s
        )
        values: dict[int, object] = {}
        try:
            session.run(send, feed_dict={payload: wire.dumps([me, value])})
            while len(values) < len(tasks):
                item = take_when_there(
                    tf,
                    session,
                    inbox,
                    lambda: [t for t in tasks if t.rank not in values and t.rank != me],
                    self.layout,
                    doing,
                    self.timeout_s,
                    poll_s=0.05,
                )
                rank, received = _gathered(item, len(tasks))
                values[rank] = received
        except tf.errors.OpError as exc:
            raise explain_failure(tf, exc, self.layout, doing, self.timeout_s) from None
        finally:
            session.close()
        return [values[rank] for rank in range(len(tasks))]
