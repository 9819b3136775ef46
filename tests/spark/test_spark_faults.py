"""The bulk-bucketing job under faults: its report and layout files against an undisturbed
run's over the same synthetic input, byte for byte.

- An executor lost mid-job, and every task of two stages failing its first attempt, on a
  ``local-cluster`` master (two executor processes): the faulted runs' report.json, report.md,
  report.png and balanced-layout.json equal the undisturbed run's.
- The driver (a child Python process running the job) killed with SIGKILL while it writes a
  file, into an empty folder or over a finished run's files: no file under a final name is
  partial; each is absent or equals the undisturbed run's.

The driver's clock is pinned in every run (:func:`_pin_clock`). Two fields of the report come
from it and differ between any two runs: ``timings`` (seconds per step, in report.json and
the Timings table of report.md) and the balanced layout's ``created_at_ms``/``sealed_at_ms``
(the run's ``now``, in report.json and balanced-layout.json; the policy decisions use ``now``
only relatively). Pinned, they let whole files be compared; nothing else is left out.

Each run is in a child interpreter (this file run as a script): a test session may already hold
a ``local[2]`` SparkContext, and one JVM takes one. Each fault kind is tallied with
:func:`support.faults.record_fault` for the summary.
"""

import builtins
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.faults import record_fault

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "local-cluster[2,1,512]"
# Two cores as the cluster has: the synthetic input is generated per partition of
# spark.range, whose count is the session's default parallelism.
LOCAL = "local[2]"
MESSAGES = 20_000
JOB_ARGS = ["--synthetic-keys", str(MESSAGES), "--key-space", "700", "--segments", "3"]
JOB_ARGS += ["--top", "5"]
# In the order write_outputs writes them.
OUTPUTS = ("report.json", "report.md", "report.png", "balanced-layout.json")
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    "spark.executor.memory": "512m",
    # Four tasks per shuffle stage over two one-core executors: whichever executor is lost
    # has finished some of the stage's tasks, whose output has to be recomputed.
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
    # One failure per task is allowed, so a task failing twice fails the run.
    "spark.task.maxFailures": "2",
}
FIXED_NOW_S = 1_700_000_000.0
CLUSTER_TIMEOUT_S = 300.0
WRITER_TIMEOUT_S = 180.0
# How long a paused write waits to be killed before it goes on.
PAUSE_S = 120.0


# --- the child: runs the job ------------------------------------------------------------


def _pin_clock() -> None:
    import spark_udfs.job as job

    job.time = SimpleNamespace(time=lambda: FIXED_NOW_S, monotonic=lambda: 0.0)  # type: ignore[attr-defined,assignment]


def _session(master: str) -> Any:
    from spark_udfs.session import get_session

    spark = get_session(master, "keyshared-faults", SESSION_CONF)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _run_job(out: Path) -> None:
    from spark_udfs.job import main

    code = main([*JOB_ARGS, "--out", str(out)])
    if code != 0:
        raise SystemExit(f"the job exited with {code} writing {out}")


def _fault_step(fault: str, where: str, marks: Path) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """An identity ``mapInArrow`` step that applies ``fault`` in the tasks running it:
    ``"fail"`` raises in every task's first attempt; ``"kill"`` SIGKILLs the executor JVM
    once. It leaves empty files in ``marks`` named
    ``EVENT.WHERE.STAGE.PARTITION.ATTEMPT.TASK.EXECUTOR``, EVENT one of ``raised``, ``ran``
    (got past the fault), ``done`` (passed every batch on) and ``kill``. It runs in the
    executors' Python workers, which unpickle it by value, so it imports what it needs."""

    def step(batches: Iterator[Any]) -> Iterator[Any]:
        import os
        import signal
        import time
        from pathlib import Path

        from pyspark import TaskContext

        def parent(pid: int) -> int:
            # The command name may hold ") ": the fields after its last ")" are fixed.
            stat = Path(f"/proc/{pid}/stat").read_text()
            return int(stat.rsplit(")", 1)[1].split()[1])

        def executor() -> tuple[int, str]:
            # Worker, then the PySpark daemon, then the executor JVM.
            pid = os.getpid()
            while pid > 1:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in args:
                    return pid, args[args.index(b"--executor-id") + 1].decode()
                pid = parent(pid)
            raise RuntimeError("this task runs in no executor process")

        ctx = TaskContext.get()
        assert ctx is not None
        pid, executor_id = executor()
        stage = ctx.stageId()
        task = f"{where}.{stage}.{ctx.partitionId()}.{ctx.attemptNumber()}"
        task += f".{ctx.taskAttemptId()}.{executor_id}"
        if fault == "fail" and ctx.attemptNumber() == 0:
            (marks / f"raised.{task}").touch()
            raise RuntimeError(f"fault injected: attempt 0 of {task} fails")
        (marks / f"ran.{task}").touch()
        # Killing from the second task an executor runs in the stage, never its first,
        # guarantees the lost executor holds finished output of this stage as well as a
        # running task; with four tasks on two one-core executors some task is a second.
        ran_here = list(marks.glob(f"done.{where}.{stage}.*.{executor_id}"))
        if fault == "kill" and ran_here:
            try:
                fd = os.open(marks / "killed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, f"{pid} {executor_id}".encode())
                os.close(fd)
                (marks / f"kill.{task}").touch()
                os.kill(pid, signal.SIGKILL)
                # The daemon ends this worker once its JVM is gone; nothing it would
                # send could arrive.
                time.sleep(30)
        yield from batches
        (marks / f"done.{task}").touch()

    return step


# The job's own functions, kept on the first _inject so that faults never stack.
_ORIGINALS: dict[str, Callable[..., Any]] = {}


def _inject(fault: str | None, wheres: tuple[str, ...], marks: Path) -> None:
    """Puts :func:`_fault_step` after the job's input (``"input"``) and after its routing
    (``"routing"``, the stage that also observes the hottest keys), or with no ``fault``
    takes it out."""
    import spark_udfs.bucketing as bucketing
    import spark_udfs.job as job

    _ORIGINALS.setdefault("input", job.read_messages)
    _ORIGINALS.setdefault("routing", bucketing.with_routing)
    job.read_messages = _ORIGINALS["input"]
    bucketing.with_routing = _ORIGINALS["routing"]
    if fault is None:
        return

    def stepped(where: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            df = _ORIGINALS[where](*args, **kwargs)
            return df.mapInArrow(_fault_step(fault, where, marks), df.schema)

        return call

    if "input" in wheres:
        job.read_messages = stepped("input")
    if "routing" in wheres:
        bucketing.with_routing = stepped("routing")


def _cluster_child(out: Path) -> None:
    """On ``local-cluster``: an undisturbed run, one whose hooked tasks each fail their
    first attempt, and one that loses an executor; then which executors are left."""
    spark = _session(CLUSTER)
    try:
        _run_job(out / "clean")
        for fault, wheres, name in (
            ("fail", ("input", "routing"), "task-failed"),
            ("kill", ("routing",), "executor-lost"),
        ):
            marks = out / f"{name}-marks"
            marks.mkdir()
            _inject(fault, wheres, marks)
            _run_job(out / name)
        _inject(None, (), out)
        killed_pid, killed_id = (out / "executor-lost-marks" / "killed").read_text().split()
        try:
            os.kill(int(killed_pid), 0)
            alive = True
        except ProcessLookupError:
            alive = False
        ids = spark.sparkContext._jsc.sc().getExecutorIds().mkString(",")
        state = {"killed": killed_id, "killed_alive": alive, "executors": ids.split(",")}
        (out / "executors.json").write_text(json.dumps(state), encoding="utf-8")
    finally:
        spark.stop()


class _PausedWrite:
    """A file whose first write stops halfway, flushed, and waits to be killed."""

    def __init__(self, file: Any, name: str, events: Path) -> None:
        self._file, self._name, self._events = file, name, events
        self._paused = False

    def write(self, data: Any) -> int:
        if self._paused:
            return int(self._file.write(data))
        self._paused = True
        half = len(data) // 2
        written = int(self._file.write(data[:half]))
        self._file.flush()
        _event(self._events, f"paused {self._name} {half}")
        time.sleep(PAUSE_S)
        return written + int(self._file.write(data[half:]))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def __enter__(self) -> "_PausedWrite":
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.__exit__(*exc)


def _event(events: Path, line: str) -> None:
    fd = os.open(events, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def _pause_writes_of(target: str, events: Path) -> None:
    """Every ``open`` for writing of a file whose name holds ``target`` (the file itself or a
    temporary one for it) pauses halfway through its first write; whatever opens it, as long
    as it goes through Python's ``open``."""
    real_open = builtins.open

    def paused_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        opened = real_open(file, mode, *args, **kwargs)
        writing = any(m in mode for m in "wxa+")
        if writing and isinstance(file, str | os.PathLike) and target in Path(file).name:
            return _PausedWrite(opened, Path(file).name, events)
        return opened

    builtins.open = paused_open
    io.open = paused_open


def _writer_child(out: Path, target: str, over_previous: bool) -> None:
    """An undisturbed run, then a run that pauses halfway through writing ``target`` (into a
    fresh folder, or into one holding the undisturbed run's files), where the test kills it."""
    events = out / "events"
    spark = _session(LOCAL)
    _event(events, f"jvm {spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()}")
    _run_job(out / "clean")
    killed = out / "killed"
    if over_previous:
        killed.mkdir()
        for name in OUTPUTS:
            (killed / name).write_bytes((out / "clean" / name).read_bytes())
    _pause_writes_of(target, events)
    _run_job(killed)
    _event(events, "finished")


def _child(argv: list[str]) -> None:
    _pin_clock()
    if argv[0] == "cluster":
        _cluster_child(Path(argv[1]))
    else:
        _writer_child(Path(argv[1]), argv[2], argv[3] == "over-previous")


# --- the tests ------------------------------------------------------------------------------


def _start_child(*args: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT / "tests"), os.environ.get("PYTHONPATH")) if p
        ),
        # Executors of local-cluster start Python workers as a cluster does, from PYSPARK_PYTHON.
        "PYSPARK_PYTHON": sys.executable,
    }
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, __file__, *args], cwd=ROOT, env=env, stdout=sink, stderr=sink
        )


def _log_tail(log: Path, chars: int = 4000) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-chars:]


def _mismatches(clean: Path, run: Path) -> list[str]:
    return [name for name in OUTPUTS if (clean / name).read_bytes() != (run / name).read_bytes()]


def _marks(folder: Path) -> list[tuple[str, ...]]:
    """The marks of :func:`_fault_step` as (event, where, stage, partition, attempt, task,
    executor)."""
    return [tuple(p.name.split(".")) for p in folder.iterdir() if "." in p.name]


@pytest.fixture(scope="module")
def cluster_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cluster")
    log = out / "child.log"
    child = _start_child("cluster", str(out), log=log)
    try:
        code = child.wait(timeout=CLUSTER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        pytest.fail(f"the cluster runs took over {CLUSTER_TIMEOUT_S} s:\n{_log_tail(log)}")
    assert code == 0, f"the cluster runs failed ({code}):\n{_log_tail(log)}"
    return out


def test_tasks_failing_once_change_no_output_byte(cluster_runs: Path) -> None:
    """Every task of the input stage and of the routing stage fails its first attempt and
    passes its second (``spark.task.maxFailures`` 2, so a task failing twice would fail the
    run): the four output files equal the undisturbed run's byte for byte."""
    marks = _marks(cluster_runs / "task-failed-marks")
    raised = {m[1:4] for m in marks if m[0] == "raised"}
    passed = {m[1:4]: m[4] for m in marks if m[0] == "ran"}
    mismatched = _mismatches(cluster_runs / "clean", cluster_runs / "task-failed")
    record_fault(
        "spark task failed once",
        faults=len(raised),
        messages=MESSAGES,
        mismatched=len(mismatched),
        findings=["a retried task's output and observed hot keys are counted once"],
    )
    assert {where for where, _, _ in raised} == {"input", "routing"}
    assert all(m[4] == "0" for m in marks if m[0] == "raised"), "only first attempts raise"
    assert set(passed) == raised and set(passed.values()) == {"1"}, marks
    assert mismatched == []


def test_executor_lost_mid_job_changes_no_output_byte(cluster_runs: Path) -> None:
    """An executor's JVM killed with SIGKILL from inside a running task of the routing stage,
    after it finished another task of that stage: Spark reruns the running task and the
    finished ones whose output died with it, the job completes, and the four output files
    equal the undisturbed run's byte for byte."""
    folder = cluster_runs / "executor-lost-marks"
    marks = _marks(folder)
    kills = [m for m in marks if m[0] == "kill"]
    done = [m for m in marks if m[0] == "done"]
    # A partition done twice: finished output recomputed after the loss.
    partitions = [m[3] for m in done]
    reruns = len(partitions) - len(set(partitions))
    state = json.loads((cluster_runs / "executors.json").read_text(encoding="utf-8"))
    mismatched = _mismatches(cluster_runs / "clean", cluster_runs / "executor-lost")
    record_fault(
        "spark executor lost",
        faults=len(kills),
        messages=MESSAGES,
        mismatched=len(mismatched),
        findings=[
            "finished map output on the lost executor is recomputed; the hot keys, which Spark "
            "observes per task, are not counted twice"
        ],
    )
    assert len(kills) == 1 and (folder / "killed").exists()
    (kill,) = kills
    assert not state["killed_alive"], "the killed executor's JVM still runs"
    assert state["killed"] not in state["executors"], state
    assert {m[3] for m in done} == {"0", "1", "2", "3"}, "every partition finished"
    assert reruns >= 1, f"no finished task was rerun after executor {kill[6]} was lost: {marks}"
    assert mismatched == []


def _wait_for_event(
    events: Path, prefix: str, child: subprocess.Popen[bytes], log: Path, timeout_s: float
) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = events.read_text(encoding="utf-8").splitlines() if events.exists() else []
        found = [line for line in lines if line.startswith(prefix)]
        if found:
            return found[0]
        if child.poll() is not None:
            pytest.fail(
                f"the driver exited ({child.returncode}) before {prefix!r}:\n{_log_tail(log)}"
            )
        time.sleep(0.05)
    pytest.fail(f"no {prefix!r} from the driver within {timeout_s} s:\n{_log_tail(log)}")


def _end_jvm(pid: int, timeout_s: float = 30.0) -> None:
    """Waits for the killed driver's JVM, which exits once its driver's pipe closes, and
    kills it if it has not."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    pytest.fail(f"the driver's JVM {pid} outlived it by {timeout_s} s")


@pytest.mark.parametrize(
    ("target", "over_previous"),
    [
        ("report.json", False),
        ("report.png", True),
        ("balanced-layout.json", False),
    ],
)
def test_driver_killed_mid_write_leaves_no_partial_file(
    tmp_path: Path, target: str, over_previous: bool
) -> None:
    """The driver killed with SIGKILL halfway through writing ``target`` (into an empty folder,
    or over a finished run's files): every output under its final name is absent or equals
    the undisturbed run's byte for byte (so the JSON parses whole); the files written before
    ``target`` are there, and the only partial bytes are in a hidden ``.NAME.*.tmp`` file."""
    log = tmp_path / "child.log"
    events = tmp_path / "events"
    child = _start_child(
        "writer",
        str(tmp_path),
        target,
        "over-previous" if over_previous else "fresh",
        log=log,
    )
    try:
        jvm = int(_wait_for_event(events, "jvm ", child, log, WRITER_TIMEOUT_S).split()[1])
        paused = _wait_for_event(events, "paused ", child, log, WRITER_TIMEOUT_S)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    _end_jvm(jvm)

    clean, killed = tmp_path / "clean", tmp_path / "killed"
    _, paused_name, half = paused.split()
    index = OUTPUTS.index(target)
    partial = [
        name
        for name in OUTPUTS
        if (killed / name).exists() and (killed / name).read_bytes() != (clean / name).read_bytes()
    ]
    record_fault(
        "spark driver killed mid-write",
        faults=1,
        messages=MESSAGES,
        mismatched=len(partial),
        findings=["a killed write leaves only a hidden .NAME.*.tmp beside the outputs"],
    )
    assert partial == [], f"partial files under final names: {partial}"
    present = {name for name in OUTPUTS if (killed / name).exists()}
    assert present == set(OUTPUTS if over_previous else OUTPUTS[:index])
    for name in present & {"report.json", "balanced-layout.json"}:
        json.loads((killed / name).read_text(encoding="utf-8"))
    # The kill landed mid-write: the temporary file holds half of what the file holds.
    leftovers = [p for p in killed.iterdir() if p.name not in OUTPUTS]
    assert [p.name for p in leftovers] == [paused_name], leftovers
    assert paused_name.startswith(f".{target}.") and paused_name.endswith(".tmp")
    assert 0 < leftovers[0].stat().st_size == int(half) < len((clean / target).read_bytes())


if __name__ == "__main__":
    _child(sys.argv[1:])
