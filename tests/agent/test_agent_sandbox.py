"""The sandbox: untrusted code is graded in a child that cannot loop forever, reach the network
(with or without a network namespace), read the parent's secrets, write files or start
processes, and the same code always gets the same grade."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from agent.sandbox import CHILD_ENV, Failure, Limits, command, grade, namespaces_available
from agent.tasks import get_task

REVERSE = get_task("reverse")
FAST = Limits(wall_s=5.0, cpu_s=1)
needs_namespaces = pytest.mark.skipif(not namespaces_available(), reason="no user namespaces")


def _reverse(body: str, prelude: str = "") -> str:
    """A ``reverse`` that runs ``body`` first, then answers correctly: it passes only if
    ``body`` neither raises nor returns."""
    return f"{prelude}\ndef reverse(xs):\n{textwrap.indent(body, '    ')}\n    return xs[::-1]\n"


def test_correct_code_passes_and_the_grade_has_one_outcome_per_case():
    result = grade(_reverse("pass"), REVERSE)
    assert result.passed and result.failed == 0 and result.failure is None
    assert [c.passed for c in result.cases] == [True] * len(REVERSE.cases)


def test_an_infinite_loop_times_out_at_the_cpu_limit():
    result = grade(_reverse("while True:\n    pass"), REVERSE, FAST)
    assert result.timed_out and result.failure == Failure.cpu_limit
    assert not result.passed and result.failed == result.total


def test_code_that_sleeps_past_the_wall_clock_is_killed():
    result = grade(_reverse("import time\ntime.sleep(60)"), REVERSE, Limits(wall_s=1.0))
    assert result.timed_out and result.failure == Failure.timeout


@pytest.fixture
def listener():
    """A TCP server on loopback that the child must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.3)
    yield server
    server.close()


def _no_connection(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except TimeoutError:
        return True
    return False


@pytest.mark.parametrize(
    "network_namespace",
    [pytest.param(True, marks=needs_namespaces), False],
    ids=["namespace and hook", "hook alone"],
)
def test_opening_or_connecting_a_socket_is_refused(listener, network_namespace):
    port = listener.getsockname()[1]
    connects = _reverse(
        f"socket.create_connection(('127.0.0.1', {port}), timeout=1)", "import socket"
    )
    result = grade(connects, REVERSE, network_namespace=network_namespace)
    assert result.network_namespace is network_namespace
    assert not result.passed
    assert {c.raised for c in result.cases} == {"PermissionError"}  # refused, not unreachable
    assert _no_connection(listener)
    at_load = f"import socket\nsocket.socket().connect(('127.0.0.1', {port}))\n" + _reverse("pass")
    loaded = grade(at_load, REVERSE, network_namespace=network_namespace)
    assert (loaded.failure, loaded.detail) == (Failure.load_error, "PermissionError")
    assert _no_connection(listener)


@needs_namespaces
def test_the_namespace_alone_keeps_a_process_off_the_network(listener):
    """The child's command line without the runner, so no audit hook: the kernel says no."""
    port = listener.getsockname()[1]
    argv = command(True)[:-2] + [
        "-c",
        f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)",
    ]
    done = subprocess.run(argv, capture_output=True, env=CHILD_ENV, timeout=20)
    assert done.returncode != 0 and b"Network is unreachable" in done.stderr, done.stderr
    assert _no_connection(listener)
    outside = subprocess.run(argv[3:], capture_output=True, env=CHILD_ENV, timeout=20)
    assert outside.returncode == 0  # the same script outside the namespace does connect
    listener.accept()[0].close()


def test_the_environment_holds_no_secret_of_the_parent(monkeypatch):
    monkeypatch.setenv("RTRL_TEST_SECRET", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    probe = _reverse(
        "import os\n"
        f"assert set(os.environ) <= {set(CHILD_ENV)!r}, sorted(os.environ)\n"
        "assert b'hunter2' not in open('/proc/self/environ', 'rb').read()"
    )
    result = grade(probe, REVERSE)
    assert result.passed, result


def test_the_code_starts_in_an_empty_directory_without_site_packages():
    probe = _reverse(
        "import os, sys\n"
        "assert os.listdir('.') == [] and 'rtrl-grade-' in os.getcwd()\n"
        "assert not any('site-packages' in p for p in sys.path)\n"
        "assert sys.flags.no_site and sys.flags.safe_path"
    )
    assert grade(probe, REVERSE).passed


@pytest.mark.parametrize(
    "body",
    [
        "open('out.txt', 'w').write('x')",
        "import os\nos.remove('/nonexistent-rtrl-probe')",  # else FileNotFoundError
        "import subprocess\nsubprocess.run(['true'])",
        "import os\nos.system('true')",
        "import os\nos.fork()",
        "import os\nos.kill(os.getppid(), 0)",  # signal 0: only asks whether it exists
        "import ctypes",
        "import _posixsubprocess",  # fork_exec raises no audit event of its own
        "import gc\ngc.get_objects()",
    ],
)
def test_writes_processes_native_calls_and_the_hook_s_neighbours_are_refused(body):
    result = grade(_reverse(body), REVERSE)
    assert not result.passed
    raised = {c.raised for c in result.cases}
    assert raised == {"PermissionError"}, result


def test_memory_and_output_floods_are_bounded():
    memory = grade(_reverse("x = [0] * (10 ** 9)"), REVERSE)
    assert {c.raised for c in memory.cases} == {"MemoryError"}
    flood = grade("def reverse(xs):\n    return 'x' * 10 ** 7\n", REVERSE)
    assert flood.failure == Failure.output_limit and not flood.passed


def test_printing_a_forged_report_changes_nothing():
    forged = '{"load": "ok", "detail": "", "cases": ' + '[{"value": [3, 2, 1]}]' + "}"
    code = f"print({forged!r})\ndef reverse(xs):\n    print({forged!r})\n    return xs\n"
    result = grade(code, REVERSE)
    assert not result.passed and result.failure is None


@pytest.mark.parametrize(
    "code,failure,detail",
    [
        ("def reverse(xs) return xs", Failure.syntax_error, "SyntaxError"),
        ("def backwards(xs):\n    return xs[::-1]", Failure.missing_function, "reverse"),
        ("raise KeyError('x')\n", Failure.load_error, "KeyError"),
        ("import sys\nsys.exit(0)\n", Failure.load_error, "SystemExit"),
        ("import os\nos._exit(0)\n", Failure.crashed, None),  # no report at all
    ],
)
def test_code_that_cannot_be_tested_says_why(code, failure, detail):
    result = grade(code, REVERSE)
    assert result.failure == failure and result.failed == result.total
    if detail is not None:
        assert result.detail == detail


def test_an_exception_counts_by_its_built_in_class_not_its_name():
    clamp = get_task("clamp")
    body = "    if lo > hi:\n        raise E()\n    return max(lo, min(value, hi))\n"
    subclass = grade(f"class E(ValueError):\n    pass\ndef clamp(value, lo, hi):\n{body}", clamp)
    shadow = "class ValueError(Exception):\n    pass\nE = ValueError\n"
    impostor = grade(f"{shadow}def clamp(value, lo, hi):\n{body}", clamp)
    assert subclass.passed
    assert not impostor.passed and impostor.failed == 1


def test_the_same_code_always_gets_the_same_grade():
    """String hashing is seeded the same in every child, so set order is too."""
    seeded = subprocess.run(
        [sys.executable, "-c", "print(hash('rtrl'))"],
        capture_output=True,
        env={"PYTHONHASHSEED": CHILD_ENV["PYTHONHASHSEED"]},
        check=True,
    )
    stable = _reverse(f"assert hash('rtrl') == {int(seeded.stdout)}")
    assert grade(stable, REVERSE).passed
    by_set = "def dedupe(xs):\n    return list(set(xs))\n"
    grades = {grade(by_set, get_task("dedupe")).cases for _ in range(4)}
    assert len(grades) == 1


def test_limits_are_checked():
    with pytest.raises(ValueError):
        Limits(wall_s=0)
    with pytest.raises(ValueError):
        Limits(memory_bytes=2**20)
