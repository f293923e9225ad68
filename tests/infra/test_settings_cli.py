"""Options derived from a settings class (``infra.settings_cli``): one per field, for dataclasses
and pydantic models alike; the declared exceptions; and the refusals that keep a new field from
silently missing its option."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pytest
from pydantic import BaseModel, Field

from infra.settings_cli import Option, SettingsOptions, add_command, add_group

if TYPE_CHECKING:  # never imported: a field the command omits may name it
    from collections import OrderedDict


@dataclass(frozen=True)
class Job:
    name: str = field(metadata={"help": "the job's name"})  # no default: the option gives one
    workers: int = field(default=4, metadata={"help": "worker processes"})
    rate: float = field(default=0.5, metadata={"help": "share sampled (50%)"})
    out: Path | None = field(default=None, metadata={"help": "report file (default: none)"})
    mode: Literal["fast", "exact"] = field(default="fast", metadata={"help": "how to run"})
    dry_run: bool = field(default=False, metadata={"help": "plan only"})
    cache: bool = field(default=True, metadata={"help": "keep no cache"})
    wait_s: float = 0.25  # its option is in milliseconds
    state: OrderedDict[str, int] | None = None  # given by the command


@dataclass(frozen=True)
class Tracked:
    state: OrderedDict[str, int] | None = field(default=None, metadata={"help": "counts"})


class Server(BaseModel):
    port: int = Field(8000, description="TCP port")
    tags: tuple[str, ...] = Field(("a",), description="names it answers to")
    verbose: bool = Field(False, description="say more")
    secret: str | None = None  # given by the command


def _job_options(**overrides: Option | str) -> SettingsOptions[Job]:
    options: dict[str, Option | str] = {
        "name": Option(default="nightly"),
        "wait_s": Option(
            flags=("--wait-ms",),
            from_field=lambda s: s * 1000,
            to_field=lambda ms: ms / 1000,
            help="how long to wait, in milliseconds",
        ),
    }
    options.update(overrides)
    return SettingsOptions(Job, options=options, omit=("state",))


def _server_options() -> SettingsOptions[Server]:
    return SettingsOptions(
        Server,
        prefix="server_",
        help_prefix="server: ",
        options={"tags": Option(type=str, nargs="+", from_field=list, to_field=tuple)},
        omit=("secret",),
    )


def _parser(*options: SettingsOptions) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cmd")
    for o in options:
        o.add_to(parser)
    return parser


def _action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


def test_no_options_give_the_settings_defaults() -> None:
    jobs, servers = _job_options(), _server_options()
    args = _parser(jobs, servers).parse_args([])
    assert jobs.read(args) == Job(name="nightly")
    assert servers.read(args) == Server()


def test_each_option_reaches_its_field() -> None:
    jobs, servers = _job_options(), _server_options()
    argv = ["--name", "n", "--workers", "2", "--rate", "0.1", "--out", "r.json", "--mode",
            "exact", "--dry-run", "--no-cache", "--wait-ms", "40", "--server-port", "9",
            "--server-tags", "x", "y", "--server-verbose"]  # fmt: skip
    args = _parser(jobs, servers).parse_args(argv)
    job = Job("n", 2, 0.1, Path("r.json"), "exact", dry_run=True, cache=False, wait_s=0.04)
    assert jobs.read(args, state=None) == job
    assert servers.read(args, secret="s") == Server(
        port=9, tags=("x", "y"), verbose=True, secret="s"
    )


def test_flags_types_and_choices_come_from_the_fields() -> None:
    parser = _parser(_job_options(), _server_options())
    assert _job_options().flags == {
        "name": ("--name",), "workers": ("--workers",), "rate": ("--rate",), "out": ("--out",),
        "mode": ("--mode",), "dry_run": ("--dry-run",), "cache": ("--no-cache",),
        "wait_s": ("--wait-ms",),
    }  # fmt: skip
    assert _action(parser, "--workers").type is int
    assert _action(parser, "--out").type is Path  # X of X | None
    assert _action(parser, "--mode").choices == ("fast", "exact")
    assert _action(parser, "--server-port").dest == "server_port"
    assert _action(parser, "--wait-ms").default == 250.0  # the field's, in the option's unit
    assert _action(parser, "--wait-ms").metavar == "WAIT_MS"
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "slow"])


def test_help_comes_from_the_field_and_says_the_default() -> None:
    parser = _parser(_job_options(), _server_options())
    assert _action(parser, "--workers").help == "worker processes (default 4)"
    assert _action(parser, "--out").help == "report file (default: none)"  # it says it itself
    assert _action(parser, "--dry-run").help == "plan only"  # a flag has no default to say
    assert _action(parser, "--server-port").help == "server: TCP port (default 8000)"
    assert "share sampled (50%)" in parser.format_help()  # plain text, not a format string


def test_a_field_without_help_is_refused_unless_omitted() -> None:
    with pytest.raises(ValueError, match=r"Job.wait_s has no help"):
        SettingsOptions(Job, options={"name": Option(default="n")}, omit=("state",))


def test_a_required_field_needs_its_option_to_give_a_default() -> None:
    with pytest.raises(ValueError, match=r"Job.name has no default"):
        _job_options(name="the job's name")


def test_a_field_without_a_readable_type_needs_its_option_to_give_one() -> None:
    with pytest.raises(TypeError, match=r"Server.tags: no option type"):
        SettingsOptions(Server, omit=("secret",))


def test_an_option_whose_type_is_only_imported_for_type_checking_needs_one_given() -> None:
    with pytest.raises(TypeError, match=r"Tracked.state: name 'OrderedDict' is not defined"):
        SettingsOptions(Tracked)


@pytest.mark.parametrize(
    ("options", "omit", "refusal"),
    [
        ({"nme": "typo"}, ("state", "wait_s", "name"), "Job has no field nme"),
        ({}, ("state", "wait_s", "name", "nme"), "Job has no field nme"),
        ({"wait_s": "wait"}, ("state", "wait_s", "name"), "both an option and omitted"),
    ],
)
def test_names_that_are_no_fields_or_declared_twice_are_refused(
    options: dict, omit: tuple[str, ...], refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal):
        SettingsOptions(Job, options=options, omit=omit)


def test_an_option_whose_dest_is_taken_is_refused() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", dest="workers")
    with pytest.raises(ValueError, match=r"Job.workers: workers is taken"):
        _job_options().add_to(parser)


def test_only_omitted_fields_are_given() -> None:
    jobs = _job_options()
    args = _parser(jobs).parse_args([])
    with pytest.raises(TypeError, match=r"Job.workers is an option"):
        jobs.read(args, workers=3)


def test_values_are_the_fields_as_the_settings_take_them() -> None:
    servers = _server_options()
    args = _parser(servers).parse_args(["--server-tags", "b", "c"])
    assert servers.values(args) == {"port": 8000, "tags": ("b", "c"), "verbose": False}


def test_a_verbatim_option_keeps_what_it_was_written_with() -> None:
    """An option written by hand before its field: no type where it had none (the choices of a
    Literal still checked), no help where it had none, no "(default X)" added."""
    jobs = _job_options(
        mode=Option(verbatim=True),
        wait_s=Option(verbatim=True, type=float, flags=("--wait-s",)),
        workers=Option(verbatim=True, type=int),
    )
    parser = _parser(jobs)
    mode, wait, workers = (_action(parser, f) for f in ("--mode", "--wait-s", "--workers"))
    assert (mode.type, mode.choices, mode.metavar) == (None, ("fast", "exact"), None)
    assert wait.help is None and wait.type is float
    assert workers.help == "worker processes"
    assert jobs.read(parser.parse_args(["--mode", "exact", "--wait-s", "2"])).wait_s == 2.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "slow"])


def test_a_flag_may_take_another_argparse_action() -> None:
    jobs = _job_options(cache=Option(action=argparse.BooleanOptionalAction))
    parser = _parser(jobs)
    assert _action(parser, "--cache").option_strings == ["--cache", "--no-cache"]
    assert jobs.read(parser.parse_args(["--no-cache"])).cache is False
    assert jobs.read(parser.parse_args([])).cache is True
    for cache in (True, False):
        job = Job(name="n", cache=cache)
        assert jobs.read(parser.parse_args(jobs.argv(job)), state=None) == job


def test_argv_reads_back_as_the_settings_it_was_written_from() -> None:
    jobs, servers = _job_options(), _server_options()
    parser = _parser(jobs, servers)
    job = Job("n", 2, 0.1, Path("r.json"), "exact", dry_run=True, cache=False, wait_s=0.04)
    server = Server(port=9, tags=("x", "y"), verbose=True)
    args = parser.parse_args(jobs.argv(job) + servers.argv(server))
    assert jobs.read(args, state=None) == job
    assert servers.read(args, secret=None) == server
    assert jobs.argv(Job(name="n")) == [
        "--name",
        "n",
        "--workers",
        "4",
        "--rate",
        "0.5",
        "--mode",
        "fast",
        "--wait-ms",
        "250.0",
    ]  # fmt: skip  (None and switches at their default left out)


def test_text_options_may_keep_argparse_own_type() -> None:
    jobs = SettingsOptions(
        Job, options={"name": Option(default="n"), "wait_s": "wait"}, omit=("state",),
        typed_text=False,
    )  # fmt: skip
    parser = _parser(jobs)
    assert _action(parser, "--name").type is None
    assert _action(parser, "--mode").type is None
    assert _action(parser, "--mode").choices == ("fast", "exact")
    assert _action(parser, "--workers").type is int
    assert jobs.read(parser.parse_args(["--name", "x"])).name == "x"


def test_an_option_may_keep_its_older_dest_required_and_help_as_written() -> None:
    jobs = _job_options(
        workers=Option(help="worker processes", dest="n", show_default=False),
        mode=Option(required=True),
    )
    parser = _parser(jobs)
    assert _action(parser, "--workers").dest == "n"
    assert _action(parser, "--workers").help == "worker processes"
    assert _action(parser, "--mode").required
    with pytest.raises(SystemExit):
        parser.parse_args([])
    assert jobs.read(parser.parse_args(["--workers", "3", "--mode", "exact"])).workers == 3


@dataclass(frozen=True)
class Batch:
    ids: list[str] = field(default_factory=list, metadata={"help": "ids to take (repeat)"})
    files: list[Path] = field(default_factory=list, metadata={"help": "inputs"})
    level: float = field(default=0.9, metadata={"help": "level (default %(default)s)"})


def test_repeated_and_many_valued_options_parse_their_items() -> None:
    batches = SettingsOptions(
        Batch,
        options={
            "ids": Option(action="append"),
            "files": Option(nargs="+"),
            "level": Option(argparse_format=True),
        },
    )
    parser = _parser(batches)
    assert _action(parser, "--ids").help == "ids to take (repeat)"  # an empty list says nothing
    assert "level (default 0.9)" in " ".join(parser.format_help().split())
    batch = Batch(ids=["a", "b"], files=[Path("x"), Path("y")], level=0.5)
    assert batches.read(parser.parse_args(batches.argv(batch))) == batch
    assert batches.read(parser.parse_args([])) == Batch()


@dataclass(frozen=True)
class Check:
    file: str = field(metadata={"help": "file to check, or -"})
    paths: list[Path] = field(default_factory=list, metadata={"help": "more files"})


def test_an_argument_may_be_given_by_its_place() -> None:
    checks = SettingsOptions(
        Check,
        options={"file": Option(positional=True), "paths": Option(positional=True, nargs="*")},
    )
    parser = _parser(checks)
    file = next(a for a in parser._actions if a.dest == "file")
    assert (file.option_strings, file.required, file.metavar) == ([], True, None)
    assert "usage: cmd [-h] file [paths ...]" in " ".join(parser.format_usage().split())
    with pytest.raises(SystemExit):
        parser.parse_args([])
    check = Check(file="-", paths=[Path("a"), Path("b")])
    assert checks.argv(check) == ["-", "a", "b"]
    assert checks.read(parser.parse_args(checks.argv(check))) == check
    with pytest.raises(ValueError, match="positional"):
        SettingsOptions(Check, options={"file": Option(positional=True, required=True)})


def _job(args: argparse.Namespace) -> int:
    return 0


def test_a_command_takes_its_settings_options_and_handler() -> None:
    parser = argparse.ArgumentParser(prog="rtrl")
    jobs = add_group(parser.add_subparsers(dest="command"), "jobs", help="the jobs")
    options = _job_options()
    add_command(jobs, "run", _job, options, help="run one", description="Runs it.")
    args = parser.parse_args(["jobs", "run", "--workers", "2"])
    assert (args.jobs_command, args.func, args.workers) == ("run", _job, 2)
    assert options.read(args) == Job(name="nightly", workers=2)
    with pytest.raises(SystemExit):  # a group without its action is refused
        parser.parse_args(["jobs"])
