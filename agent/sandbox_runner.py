"""The child side of the sandbox: load untrusted code, call its function on each case's arguments
and report what happened. ``agent.sandbox`` runs this file's source with ``python -c``.

Standard library only, and nothing here trusts the code it runs: before that code is compiled,
the process limits itself (address space, CPU seconds, file size, no new processes) and installs
an audit hook that refuses the network, new processes, native calls, writes to files, changes to
the file system, and the ways to reach the hook itself (the garbage collector's object lists,
tracing). Audit hooks cannot be removed; the hook reads only values bound when it was made, so
replacing a builtin or a module attribute does not weaken it. It is
a second wall, not the only one: ``agent.sandbox`` adds the kernel's network namespace
where it can. What the code prints goes to ``/dev/null``; the report (one JSON
line) goes to the descriptor that was stdout when this started. The expected values are never
here: the parent judges the report, so code that forges it can only claim answers, not learn them.

Report: ``{"load": "ok" | "syntax_error" | "load_error" | "missing_function", "detail": str,
"cases": [{"value": <JSON>} | {"raised": [builtin exception names, most specific first]} |
{"unserializable": true}]}``.
"""

from __future__ import annotations

from typing import Any

REFUSED_PREFIXES = ("socket.", "subprocess.", "ctypes.", "shutil.", "pty.", "signal.")
"""Audit events refused by their first part: the network, processes, native code, signals."""
ALLOWED_OS_EVENTS = frozenset({"os.listdir", "os.scandir"})
"""The import system lists directories; every other ``os.*`` event (process creation, kill,
remove, rename, chmod, putenv, ...) is refused."""
REFUSED_EVENTS = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.settrace",
        "sys.setprofile",
        "code.__new__",
    }
)
REFUSED_IMPORTS = frozenset({"ctypes", "_ctypes", "_posixsubprocess"})
"""Modules whose calls raise no audit event: native calls (a socket made by libc) and
``_posixsubprocess.fork_exec``, which starts a process (``subprocess`` itself cannot be imported
in the sandbox for that reason)."""
EXIT_OUTPUT_TOO_LARGE = 86
"""Exit status when the report could not be written (larger than the file size limit)."""


def make_hook(write_flags: int) -> Any:
    """The audit hook; every value it consults is bound here, never looked up when it runs."""

    def hook(
        event: str,
        args: tuple[Any, ...],
        _prefixes: tuple[str, ...] = REFUSED_PREFIXES,
        _allowed_os: frozenset[str] = ALLOWED_OS_EVENTS,
        _refused: frozenset[str] = REFUSED_EVENTS,
        _imports: frozenset[str] = REFUSED_IMPORTS,
        _write: int = write_flags,
        _error: type[Exception] = PermissionError,
    ) -> None:
        if event == "import":
            if args[0].partition(".")[0] in _imports:
                raise _error(f"importing {args[0]} is refused in the sandbox")
            return
        if event == "open":
            if args[2] & _write:
                raise _error("writing files is refused in the sandbox")
            return
        if (
            event in _refused
            or event.startswith(_prefixes)
            or (event.startswith("os.") and event not in _allowed_os)
        ):
            raise _error(f"{event} is refused in the sandbox")

    return hook


def exception_names(exc: BaseException) -> list[str]:
    """The built-in exception classes ``exc`` is an instance of, most specific first (a class
    the code defines cannot pass for ``ValueError`` unless it is one).

    >>> class Bad(ValueError): ...
    >>> exception_names(Bad())[:2]
    ['ValueError', 'Exception']
    """
    return [c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins"]


def main() -> None:
    import builtins
    import json
    import os
    import resource
    import sys

    request = json.loads(sys.stdin.read())
    limits = request["limits"]
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["output_bytes"], limits["output_bytes"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    report = os.fdopen(os.dup(1), "w", encoding="utf-8")
    silence = os.open(os.devnull, os.O_WRONLY)
    os.dup2(silence, 1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    write = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    for name in REFUSED_IMPORTS:  # an import found in sys.modules raises no event
        sys.modules.pop(name, None)
    sys.addaudithook(make_hook(write))

    outcome: dict[str, Any] = {"load": "ok", "detail": "", "cases": []}
    namespace: dict[str, Any] = {"__name__": "solution", "__builtins__": builtins}
    try:
        compiled = compile(request["code"], "<solution>", "exec")
    except (SyntaxError, ValueError) as exc:
        outcome.update(load="syntax_error", detail=type(exc).__name__)
        compiled = None
    if compiled is not None:
        try:
            exec(compiled, namespace)
        except BaseException as exc:  # the code's own failure, SystemExit included
            outcome.update(load="load_error", detail=exception_names(exc)[0])
        else:
            function = namespace.get(request["function"])
            if not callable(function):
                outcome.update(load="missing_function", detail=request["function"])
            else:
                outcome["cases"] = [_call(function, args, json) for args in request["args"]]
    try:
        report.write(json.dumps(outcome) + "\n")
        report.flush()
    except OSError:
        os._exit(EXIT_OUTPUT_TOO_LARGE)


def _call(function: Any, args: list[Any], json: Any) -> dict[str, Any]:
    try:
        value = function(*args)
    except BaseException as exc:
        return {"raised": exception_names(exc)}
    try:
        return {"value": json.loads(json.dumps(value, allow_nan=False))}
    except Exception:  # a set, an object, a cycle, NaN: not a value the cases can hold
        return {"unserializable": True}


if __name__ == "__main__":
    main()
