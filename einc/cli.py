"""`einc` command line: argument parsing only; the work is in `einc.tools.jobs` (compile, run,
check) and the tools it names.

Exit status: 0 success, 1 a located error in the user's input (program, schedule, command
line) or a failed check, 2 a bug in einc (an `InternalCompilerError`: a reproducer file is
written, see `report_internal_error`), 141 quietly when the reader of stdout went away
(`einc records show 1 | head`), as einc-opt does."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from einc.errors import EincError, InternalCompilerError, SourceLocation, UsageError

if TYPE_CHECKING:
    from einc.compiler.records import RecordContext, TaskRow
    from einc.ir.pass_statistics import Statistics
    from einc.tools.numerics.types import NumericsReport


class _ArgumentParser(argparse.ArgumentParser):
    """argparse, its usage errors raised as UsageError (exit status 1, at the option when
    the message names one) instead of exiting with status 2, the status of einc's bugs."""

    def __init__(self, *args: Any, argv: Sequence[str] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.argv = argv  # the command line being parsed, for the error's location

    def error(self, message: str) -> NoReturn:
        raise usage_error(message, self.argv, self.prog)


def usage_error(message: str, argv: Sequence[str], prog: str, tool: str = "einc") -> UsageError:
    """argparse's error `message` as a UsageError at the option it names in `argv`."""
    named = re.match(r"argument (\S+?)(/\S+)?: ", message)
    flags = (named.group(1), *(named.group(2) or "/")[1:].split("/")) if named else ()
    return UsageError(f"{message} (see {prog} --help)", argument_location(argv, *flags, tool=tool))


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    from einc.compiler.driver import STAGES

    parser = _ArgumentParser(prog="einc", description="Compile Antares IR tensor programs.", argv=argv)
    sub = parser.add_subparsers(dest="command", required=True)

    comp = sub.add_parser("compile", help="compile a .ein program to target source code", argv=argv)
    comp.add_argument("file", help="the .ein program")
    comp.add_argument("-t", "--target", default="c", help="target language (default: c)")
    comp.add_argument(
        "-o",
        "--output",
        help="write the source here (default: stdout); device targets also write the launch "
        "manifest to OUTPUT.json",
    )
    comp.add_argument(
        "--schedule",
        help="a transform-dialect schedule script (.mlir); `none` keeps the loops untouched, "
        "`default` applies the target's default schedule (default: the best tuning record "
        "for the program on this device, else the target's default schedule)",
    )
    comp.add_argument(
        "--dump-after",
        choices=STAGES,
        help="print the program after this stage instead of the final source",
    )
    comp.add_argument(
        "--print-debuginfo",
        action="store_true",
        help="with --dump-after, print each op's location (loc(\"prog.ein\":3:1), fused with "
        "the schedule op that made it); see docs/LOCATIONS.md",
    )
    _record_options(comp)
    comp.add_argument(
        "--model", metavar="DEVICE",
        help="device targets: where no tuning record measured here applies, use the best one `einc tune "
        "--model DEVICE` modelled for DEVICE (h100, a100, mi250x, rtx4090, a770, ipu-m2000, or a JSON file; "
        "default: $EINC_MODEL_DEVICE, else the GPU here when the model knows it)",
    )  # fmt: skip
    _plugin_options(comp)
    _research_options(comp)
    from einc.tools.numerics.command import add_arguments

    add_arguments(comp)

    run = sub.add_parser(
        "run", help="compile, run on random inputs, and check against the NumPy reference", argv=argv
    )
    run.add_argument("file", help="the .ein program")
    run.add_argument("-t", "--target", default="c", help="target to execute on (default: c)")
    run.add_argument(
        "--schedule", help="a schedule script (.mlir), `none` or `default` (default: the best "
        "tuning record, else the target's default schedule)"
    )
    run.add_argument("--repeat", type=int, default=5, help="timed runs, at least 1 (median is reported)")
    run.add_argument("--seed", type=int, default=None, help="seed of the random inputs (0 or more)")
    _record_options(run)
    _plugin_options(run)
    _research_options(run)
    tune = sub.add_parser(
        "tune", help="search schedules for a program; the best is kept in the tuning records", argv=argv
    )
    tune.add_argument("file", help="the .ein program")
    tune.add_argument("-t", "--target", default="c", help="target to tune on (default: c)")
    tune.add_argument("--trials", type=int, default=64,
                      help="candidates to measure (default: 64); for a program of several kernels, over all its "
                           "tasks, spread by the gradient task scheduler")
    tune.add_argument("--time-budget", help="stop after this long (e.g. 120s, 2m)")
    tune.add_argument("--workers", type=int, default=None,
                      help="parallel builds (default: cores, at most 4); with --runner dask-local, the Dask workers (default: 2)")
    tune.add_argument("--runner", default="local",
                      help="where candidates are built and measured: local (default: this process's pool and worker), "
                      "dask-local (a Dask LocalCluster of --workers processes) or dask://HOST:PORT (a Dask scheduler)")
    tune.add_argument("--early-stop", type=float, default=None, metavar="FACTOR",
                      help="time no further a candidate whose first runs take over FACTOR times the fastest "
                      "trial so far (default: 1.5; 0: time every candidate in full)")
    tune.add_argument("--threads", type=int, default=None, help="threads the kernel runs on (default: OpenMP's)")
    tune.add_argument("--db", help="tuning records database (default: $EINC_TUNING_DB or the user cache)")
    tune.add_argument("-o", "--output", help="write the best schedule script here")
    tune.add_argument("--strategy", choices=("bayes", "random"), default="bayes", help="search policy (default: bayes)")
    tune.add_argument("--resume", action="store_true", help="continue the search recorded for this program")
    tune.add_argument("--no-transfer", action="store_true",
                      help="learn nothing from the records of other programs on this device (by default the search's "
                           "cost model starts from them and its first batch tries the best schedules of the nearest "
                           "programs, re-fitted to this shape)")  # fmt: skip
    tune.add_argument("--seed", type=int, default=0, help="seed of the search and of the inputs (default: 0)")
    tune.add_argument("--report", help="also run the other policy at the same budget and plot both here (.png)")
    tune.add_argument("--quiet", action="store_true", help="no progress bar")
    tune.add_argument(
        "--model", metavar="DEVICE",
        help="device targets, where the device is absent: rank candidates by the performance model's "
        "prediction for DEVICE (h100, a100, mi250x, rtx4090, a770, ipu-m2000, or a JSON file) instead of "
        "measuring them; the records say modelled, and compiles for DEVICE use them where no measured one applies",
    )  # fmt: skip
    check = sub.add_parser(
        "check", help="compile-check device code (cuda, hip) and report registers, spills, shared memory; "
        "with --model, model the kernels' performance on a device",
        argv=argv,
    )
    check.add_argument("file", help="the .ein program")
    check.add_argument("-t", "--target", default="cuda", help="cuda or hip (default: cuda)")
    check.add_argument("--arch", action="append", help="architecture (repeatable; default: sm_80, sm_90 / gfx90a, gfx1030)")
    check.add_argument(
        "--schedule", help="a schedule script (.mlir), `none` or `default` (default: the best "
        "tuning record, else the target's default schedule)"
    )
    check.add_argument(
        "--model", metavar="DEVICE",
        help="also report, per kernel, the performance model's FLOPs, memory sectors, bank conflicts, "
        "occupancy and roofline time on DEVICE (h100, a100, mi250x, rtx4090, a770, ipu-m2000, or a "
        "JSON file describing one); modelled, not measured",
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    _record_options(check)
    _plugin_options(check)
    _research_options(check)
    explain = sub.add_parser("explain", help="the pipeline as one HTML page: IR diffs, schedule, source, checks", argv=argv)
    explain.add_argument("file", help="the .ein program")
    explain.add_argument("-t", "--target", default="c", help="target (default: c)")
    explain.add_argument("--schedule", help="a schedule script (.mlir), `none` or `default` (as for compile)")
    explain.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    explain.add_argument("--shape-scale", type=float, default=None, help="scale the shapes for the numeric checks (default: their small shapes)")
    explain.add_argument("-o", "--output", required=True, help="the page to write (.html)")
    _record_options(explain)
    _plugin_options(explain)
    _records_parser(sub, argv)
    _reduce_parser(sub, argv)
    # -- einc sketches (the tuner's search space, einc.tune.space) --
    sketches = sub.add_parser("sketches", help="print the tuner's sketches of a program (its search space)", argv=argv)
    sketches.add_argument("file", help="the .ein program")
    sketches.add_argument("-t", "--target", default="c", help="target (default: c)")
    sketches.add_argument("--rule", help="only the sketches of this rule (`default` for the target's default)")
    _serve_parser(sub, argv)
    return parser


def _serve_parser(sub: argparse._SubParsersAction[_ArgumentParser], argv: Sequence[str]) -> None:
    """`einc serve` (einc.tools.serve.app): the codegen service."""
    serve = sub.add_parser(
        "serve", help="the codegen service: POST /compile answers source and manifest (HTTP)", argv=argv,
        description="Serve compile requests over HTTP: POST /compile with JSON {\"ir\", \"input_dict\", \"target\", "
        "\"schedule\"?} answers {\"source\", \"manifest\", \"record\", \"schedule_source\"}; a mistake in the "
        "request answers 400 with the located error. POST /tune with the same JSON and \"trials\" starts a tuning "
        "job on the server's device (202 {\"id\"}); GET /tune/ID says how it stands. GET /health, GET /targets. "
        "See README.md, 'Codegen service'.",
    )  # fmt: skip
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8880, help="TCP port, 0 for any free one (default: 8880)")
    serve.add_argument("--workers", type=int, help="compile worker processes (default: cores, at most 4)")
    serve.add_argument("--timeout", type=float, default=30.0, help="seconds a compile may take (default: 30; 504 after)")
    serve.add_argument("--max-body", type=int, default=1 << 20, help="largest request in bytes (default: 1 MiB; 413 above)")
    serve.add_argument("--db", metavar="PATH", help=_DB_HELP + "; its best record for each program is used, "
                       "tuning jobs add theirs")  # fmt: skip
    serve.add_argument("--tune-queue", type=int, default=8,
                       help="tuning jobs that may wait per target and device (default: 8; 429 above)")  # fmt: skip
    serve.add_argument("--max-trials", type=int, default=1000, help="most trials of one tuning job (default: 1000)")
    serve.add_argument("--tune-workers", type=int, help="build processes of a tuning job (default: cores, at most 4)")


# ---- tuning records: `--db`/`--no-records` of compile and run, and `einc records` ----------------
_DB_HELP = "the tuning database (default: $EINC_TUNING_DB, else ~/.cache/einc/tuning.db)"


def _record_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH", help=_DB_HELP + "; its best record for the program is used")
    parser.add_argument(
        "--no-records", action="store_true",
        help="never use a tuning record (also: --schedule default)",
    )  # fmt: skip


# ---- plugins, stage hooks and progress of compile, run and check --------------------------------
def _plugin_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--load-pass-plugin", action="append", default=[], metavar="PATH",
        help="a Python file whose xdsl ModulePass subclasses become passes (repeatable; "
        "see docs/PLUGINS.md)",
    )  # fmt: skip
    parser.add_argument(
        "--pipeline-hook", action="append", default=[], metavar="STAGE=PASSES",
        help="run the pass pipeline PASSES at the end of STAGE (ein, loops, scheduled, target); "
        "repeatable, e.g. --pipeline-hook 'loops=my-pass{factor=2}'",
    )  # fmt: skip
    parser.add_argument(
        "--progress", action="store_true",
        help="print each stage's time on stderr as it ends (default: only on a terminal, "
        "once the compilation has taken 2 s)",
    )  # fmt: skip


def _research_options(parser: argparse.ArgumentParser) -> None:
    """`--reproducer`, `--pass-statistics` and `--debug-counter` (docs/RESEARCH.md)."""
    parser.add_argument(
        "--reproducer", metavar="FILE",
        help="when the command fails (an internal error, an error, a --check-numerics mismatch), write a "
        "reproducer here: replay it with einc-opt --run-reproducer, shrink it with einc reduce",
    )  # fmt: skip
    parser.add_argument(
        "--pass-statistics", action="store_true",
        help="after the compilation, each pass's ops created and erased and its rewrites per pattern (stderr)",
    )  # fmt: skip
    parser.add_argument(
        "--debug-counter", action="append", default=[], metavar="PASS-skip=N,PASS-count=M",
        help="apply only some of a pass's pattern rewrites: skip the first N, apply the next M (-1: all)",
    )  # fmt: skip


def _reduce_parser(sub: argparse._SubParsersAction[_ArgumentParser], argv: Sequence[str]) -> None:
    """`einc reduce` (einc.tools.reduce): shrink a reproducer while it fails the same way."""
    reduce = sub.add_parser(
        "reduce", help="shrink a reproducer while it fails the same way (delta debugging)", argv=argv,
        description="Replay a reproducer (written by --reproducer, or for an internal error), then shrink its "
        "pipeline, schedule, statements, expressions and shapes while it fails the same way at the same step. "
        "See docs/RESEARCH.md.",
    )  # fmt: skip
    reduce.add_argument("file", help="the reproducer")
    reduce.add_argument("-o", "--output", help="write the reduced reproducer here (default: FILE.reduced.txt)")
    reduce.add_argument("--time-budget", default="60s", help="stop after this long (e.g. 60s, 2m; default 60s)")
    reduce.add_argument("--jobs", type=int, default=None, help="candidates tested at once (default: cores, at most 4)")
    reduce.add_argument(
        "--cpu-time", action="store_true",
        help="count the budget in CPU seconds (einc reduce's and its tests') instead of wall time, for "
        "measurements on a shared machine",
    )  # fmt: skip
    reduce.add_argument("--quiet", action="store_true", help="no progress lines")


def pipeline_hooks(hooks: Sequence[str], argv: Sequence[str]) -> dict[str, list[str]]:
    """`--pipeline-hook STAGE=PASSES` options as `extra_passes` (stage -> pipeline texts);
    a malformed hook, an unknown stage, pass or option: a UsageError at its place in the
    command line."""
    from einc.passes.pipeline import did_you_mean, parse_passes
    from einc.compiler.driver import HOOK_STAGES
    from einc.compiler.registry import get_all_passes

    text = " ".join(["einc", *argv])
    extra: dict[str, list[str]] = {}
    for hook in hooks:
        start = text.find(hook) if hook else -1
        where = argument_location(argv, "--pipeline-hook")
        if start >= 0:
            where = SourceLocation("<command line>", 1, start + 1, max(1, len(hook)), text)
        stage, equal, passes = hook.partition("=")
        stage = stage.strip()
        if not equal or not passes.strip():
            raise UsageError(f"--pipeline-hook takes STAGE=PASSES (stages: {', '.join(HOOK_STAGES)}), not {hook!r}", where)
        if stage not in HOOK_STAGES:
            raise UsageError(
                f"--pipeline-hook: unknown stage '{stage}'{did_you_mean(stage, HOOK_STAGES)} "
                f"(stages: {', '.join(HOOK_STAGES)})", where,
            )  # fmt: skip
        try:
            parse_passes(passes, get_all_passes())
        except UsageError as err:
            if err.loc is not None and start >= 0:
                col = start + len(hook) - len(passes) + err.loc.col
                err.loc = SourceLocation("<command line>", 1, col, err.loc.length, text)
            raise
        extra.setdefault(stage, []).append(passes)
    return extra


def hook_error_on_command_line(err: EincError, argv: Sequence[str]) -> None:
    """An error placed in a hook's pipeline text (`extra_passes['loops']:1:10`: a plugin
    pass refusing an option when it runs) placed at that text on the command line instead."""
    loc = err.loc
    found = re.fullmatch(r"extra_passes\['(\w+)'\]", loc.file) if loc is not None else None
    if loc is None or found is None or loc.source is None:
        return
    text = " ".join(["einc", *argv])
    start = text.find(f"{found.group(1)}={loc.source}")
    if start >= 0:
        col = start + len(found.group(1)) + 1 + loc.col
        err.loc = SourceLocation("<command line>", 1, col, loc.length, text)


def stage_progress(forced: bool) -> Callable[[str, float], None] | None:
    """The progress printer of `--progress` (every stage), or on a terminal (the stages that
    end once the compilation has run 2 s); None when stderr is neither."""
    if not forced and not sys.stderr.isatty():
        return None
    threshold = 0.0 if forced else 2.0
    total = 0.0

    def report(stage: str, seconds: float) -> None:
        nonlocal total
        total += seconds
        if total >= threshold:
            print(f"einc: {stage} done in {seconds:.2f} s ({total:.2f} s so far)", file=sys.stderr, flush=True)

    return report


def _records_parser(sub: argparse._SubParsersAction[_ArgumentParser], argv: Sequence[str]) -> None:
    records = sub.add_parser("records", help="list, show, export or import tuning records", argv=argv)
    actions = records.add_subparsers(dest="records_command", required=True)
    listing = actions.add_parser(
        "list", help="one line per tuned program, target and context (device, compiler, ...), and whether it applies here",
        argv=argv)  # fmt: skip
    show = actions.add_parser("show", help="a record and its schedule", argv=argv)
    show.add_argument("id", type=int, help="the record's id (`einc records list` shows each task's best)")
    export = actions.add_parser("export", help="records as JSON lines", argv=argv)
    export.add_argument("-o", "--output", help="write here (default: stdout)")
    export.add_argument("--task", help="only the records of this task key")
    imported = actions.add_parser("import", help="add the records of a JSON lines file", argv=argv)
    imported.add_argument("file", help="a file written by `einc records export`")
    for action in (listing, show, export, imported):
        action.add_argument("--db", metavar="PATH", help=_DB_HELP)


def records_command(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """`einc records list|show|export|import`."""
    from einc.tune.records import RecordDB
    from einc.compiler.records import RecordError, default_db_path, read_jsonl, show_lines

    path = Path(args.db) if args.db else default_db_path()
    action = args.records_command
    if action != "import" and not path.exists():
        if action == "show":
            raise RecordError("no tuning database here", SourceLocation(str(path), 1, 1))
        if action == "list":
            print(f"no tuning records ({path} does not exist)")
        return 0
    if action == "import":
        try:
            with open(args.file) as inp:
                rows = read_jsonl(inp, args.file)  # every line checked before the database is touched
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"cannot read records: {err}", SourceLocation(args.file, 1, 1)) from None
        with RecordDB(path) as db:
            print(f"einc: imported {db.import_rows(rows)} new records into {path}")
        return 0
    with RecordDB(path, create=False) as db:
        if action == "list":
            tasks = db.tasks()
            print(render_tasks(tasks, path, _contexts_here({t["target"] for t in tasks})))
        elif action == "show":
            record = db.get(args.id)
            if record is None:
                raise UsageError(f"no record {args.id} in {path}", argument_location(argv, str(args.id)))
            print("\n".join(show_lines(record, _contexts_here({record.target}).get(record.target))))
        elif args.output:
            try:
                with open(args.output, "w") as out:
                    count = db.export_jsonl(out, args.task)
            except OSError as err:
                raise UsageError(f"cannot write the records: {err}", argument_location(argv, "-o", "--output")) from None
            print(f"einc: exported {count} records to {args.output}", file=sys.stderr)
        else:
            db.export_jsonl(sys.stdout, args.task)
    return 0


def _contexts_here(targets: set[str]) -> dict[str, RecordContext]:
    """This machine's record context for each of `targets` that einc knows (a record of another
    target, e.g. imported from a plugin's, has none)."""
    from einc.compiler.records import record_context
    from einc.targets import get_all_targets, get_target

    known = get_all_targets()
    return {t: record_context(get_target(t)) for t in sorted(targets) if t in known}


def applies(task: TaskRow, here: Mapping[str, RecordContext]) -> str:
    """`einc records list`'s last column: `yes`, or `no (compiler, flags)`: the key fields of the
    row's records that differ from this machine's (`no (before keys)`: records of an einc before
    contexts; `?`: a target einc does not know)."""
    now = here.get(task["target"])
    if now is None:
        return "?"
    if task["context"] is None:
        return "no (before keys)"
    differing = task["context"].differing(now)
    return "yes" if not differing else f"no ({', '.join(differing)})"


def render_tasks(tasks: Sequence[TaskRow], path: Path, here: Mapping[str, RecordContext] | None = None) -> str:
    """`einc records list`: a table, one row per task key, target and context (`here`: this
    machine's context per target, for the `applies` column: whether `einc compile` uses the
    row's records, else which key fields differ; `einc records show ID` shows them)."""
    if not tasks:
        return f"no tuning records in {path}"
    here = here or {}
    head = ("task", "target", "device", "program", "trials", "ok", "best ms", "best id", "best", "applies")
    rows = [(t["task_key"], t["target"], t["device"], t["summary"], str(t["trials"]), str(t["ok"]),
             "-" if t["best_s"] is None else f"{t['best_s'] * 1e3:.3f}",
             "-" if t["best_id"] is None else str(t["best_id"]), t["best_note"] or "-", applies(t, here))
            for t in tasks]  # fmt: skip
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 4 or i >= 8 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in (head, *rows)]  # fmt: skip
    return "\n".join(line.rstrip() for line in lines) + f"\n({path})"


def argument_location(argv: Sequence[str], *flags: str, tool: str = "einc") -> SourceLocation:
    """The place of option `flags` (and its value) in the command line `TOOL ARGV...`,
    as a location in the text `<command line>` (its start when the option is not there)."""
    words = [tool, *argv]
    text = " ".join(words)
    offset = 0
    for i, word in enumerate(words):
        if word in flags or any(word.startswith(f + "=") for f in flags if f.startswith("--")):
            length = len(word) + (len(words[i + 1]) + 1 if word in flags and i + 1 < len(words) else 0)
            return SourceLocation("<command line>", 1, offset + 1, length, text)
        offset += len(word) + 1
    return SourceLocation("<command line>", 1, 1, 1, text)


def check_arguments(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Refuse option values no job can use, before any work (UsageError at the option)."""
    if getattr(args, "seed", None) is not None and args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, got {args.seed}", argument_location(argv, "--seed"))
    for flag in ("trials", "workers", "threads", "jobs"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise UsageError(f"--{flag} must be at least 1, got {value}", argument_location(argv, f"--{flag}"))
    scale = getattr(args, "shape_scale", None)
    if scale is not None and not scale > 0:  # NaN too
        raise UsageError(f"--shape-scale must be above 0, got {scale}", argument_location(argv, "--shape-scale"))
    if getattr(args, "repeat", 1) < 1:
        raise UsageError(
            f"--repeat must be at least 1, got {args.repeat}", argument_location(argv, "--repeat")
        )
    if getattr(args, "print_debuginfo", False) and getattr(args, "dump_after", None) in (None, "source"):
        raise UsageError(
            "--print-debuginfo prints the locations of IR: use it with --dump-after ein, loops, "
            "scheduled or target", argument_location(argv, "--print-debuginfo"),
        )  # fmt: skip
    output = getattr(args, "output", None)
    if output is not None:
        where = argument_location(argv, "-o", "--output")
        if Path(output).is_dir():
            raise UsageError(f"cannot write the output to '{output}': it is a directory", where)
        folder = Path(output).parent
        if not folder.is_dir():
            raise UsageError(f"cannot write the output to '{output}': no directory '{folder}'", where)


def report_internal_error(
    ice: InternalCompilerError, tool: str, write: Callable[[], Path | None] | None = None, **context: str
) -> Path | None:
    """Print `ice` and write its reproducer (in EINC_REPRO_DIR, else the current directory,
    else the temporary directory): the replayable one `write` writes (einc.tools.reduce.command),
    else the plain report of `ice`; the reproducer's path, None when none could be written."""
    ice.add_context(**context)
    if os.environ.get("EINC_TRACEBACK"):  # the traceback on stderr too (it is in the reproducer)
        traceback.print_exception(ice)
    print(f"{tool}: {ice}", file=sys.stderr)
    if write is not None and (path := write()) is not None:
        return path
    path = None
    for folder in (None, tempfile.gettempdir()):
        try:
            path = ice.write_reproducer(folder)
            break
        except OSError:
            continue
    if path is not None:
        print(f"{tool}: a reproducer is in {path}", file=sys.stderr)
    else:
        print(f"{tool}: could not write a reproducer; here it is:\n{ice.reproducer()}", file=sys.stderr)
    return path


def closed_stdout() -> int:
    """`... | head`: the reader of stdout is gone. Point stdout at /dev/null (so that the
    flush at exit cannot fail again) and end quietly with 141, a shell's status for SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


def _read(path: str | None) -> str | None:
    """A file's text for a reproducer (None for no file, or one that cannot be read)."""
    try:
        return Path(path).read_text(errors="replace") if path else None
    except OSError:
        return None


def _schedule_file(argument: str | None) -> str | None:
    """The file `--schedule` names (not `none` or `default`)."""
    from einc.schedule.choice import ScheduleChoice

    return argument if argument not in ScheduleChoice.WORDS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser(argv).parse_args(argv)
    except UsageError as err:
        print(err.render(), file=sys.stderr)
        return 1
    stats = None
    try:
        check_arguments(args, argv)
        stats = statistics_requested(args, argv)
        if stats is None:
            status = _command(args, argv)
        else:
            from einc.ir.pass_statistics import instrumenting

            with instrumenting(stats):
                status = _command(args, argv)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:  # `einc records show 1 | head`: the reader is gone
        return closed_stdout()
    except EincError as err:
        if err.loc is None:  # a runtime or toolchain error: point at the program itself
            err.loc = SourceLocation(getattr(args, "file", "<command line>"), 1, 1)
        hook_error_on_command_line(err, argv)
        print(err.render(), file=sys.stderr)
        if getattr(args, "reproducer", None) and not isinstance(err, UsageError):
            from einc.tools.reduce.command import write_for_error

            write_for_error("einc", args, argv, err, args.reproducer)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - an einc bug: a reproducer, exit status 2
        ice = InternalCompilerError.wrap(exc, args.command)
        context = {"command line": " ".join(["einc", *argv]), "target": getattr(args, "target", "")}
        if args.command != "records" and (program := _read(getattr(args, "file", None))) is not None:
            context["program"] = program
        if (schedule := _read(_schedule_file(getattr(args, "schedule", None)))) is not None:
            context["schedule"] = schedule
        writer: Callable[[], Path | None] | None = None
        if getattr(args, "file", None) and args.command in ("compile", "run", "check"):
            from einc.tools.reduce.command import write_for_error

            writer = lambda: write_for_error("einc", args, argv, ice, getattr(args, "reproducer", None))  # noqa: E731
        report_internal_error(ice, "einc", writer, **context)
        return 2
    finally:
        if stats is not None and getattr(args, "pass_statistics", False):
            sys.stderr.write(stats.render())


def statistics_requested(args: argparse.Namespace, argv: Sequence[str]) -> Statistics | None:
    """The pass statistics `--pass-statistics` / `--debug-counter` ask for (None: neither);
    a malformed counter is a UsageError at the option."""
    if not getattr(args, "pass_statistics", False) and not getattr(args, "debug_counter", None):
        return None
    from einc.ir.pass_statistics import requested

    try:
        return requested(args.pass_statistics, args.debug_counter)
    except ValueError as err:
        raise UsageError(f"--debug-counter: {err}", argument_location(argv, "--debug-counter")) from None


def _command(args: argparse.Namespace, argv: list[str]) -> int:
    """The command `args` names; its exit status."""
    from einc.tools import jobs

    if args.command == "records":
        return records_command(args, argv)
    if args.command == "reduce":
        from einc.tools.reduce.command import reduce_command
        from einc.tune.command import parse_duration

        budget = parse_duration(args.time_budget, argument_location(argv, "--time-budget"))
        return reduce_command(args.file, args.output, budget, args.jobs, args.quiet, cpu_time=args.cpu_time)
    extra: dict[str, list[str]] = {}
    progress: Callable[[str, float], None] | None = None
    if args.command in ("compile", "run", "check", "explain"):
        from einc.compiler.registry import load_pass_plugins

        load_pass_plugins(args.load_pass_plugin, argv)
        extra, progress = pipeline_hooks(args.pipeline_hook, argv), stage_progress(args.progress)
    if args.command == "compile" and args.check_numerics:
        from einc.tools.numerics.command import compile_command, parse_scale

        if args.dump_after is not None:
            raise UsageError(
                "--check-numerics checks the compiled source and prints its report; --dump-after "
                "prints a stage's IR instead of the source: run them as two commands",
                argument_location(argv, "--dump-after"),
            )  # fmt: skip
        scale = parse_scale(args.shape_scale, argument_location(argv, "--shape-scale"))
        on_failure: Callable[[NumericsReport, str | None], None] | None = None
        if args.reproducer:
            from einc.tools.reduce.command import write_for_report

            def write_reproducer(report: NumericsReport, schedule_text: str | None) -> None:
                write_for_report("einc", args, argv, report, args.reproducer, schedule_text)

            on_failure = write_reproducer

        return compile_command(args.file, args.target, args.schedule, args.seed, scale,
                               use_records=not args.no_records, db=args.db, extra_passes=extra,
                               output=args.output, output_at=argument_location(argv, "-o", "--output"),
                               on_failure=on_failure)  # fmt: skip
    if args.command == "compile":
        text = jobs.compile_file_command(
            args.file,
            target=args.target,
            schedule=args.schedule,
            dump_after=args.dump_after,
            print_debuginfo=args.print_debuginfo,
            manifest_path=f"{args.output}.json" if args.output else None,
            use_records=not args.no_records,
            db=args.db,
            extra_passes=extra, progress=progress,
            model=args.model, model_at=argument_location(argv, "--model"),
        )
        if args.output:
            try:
                Path(args.output).write_text(text)
            except OSError as err:
                raise UsageError(
                    f"cannot write the output: {err.strerror or err}",
                    argument_location(argv, "-o", "--output"),
                ) from None
        else:
            sys.stdout.write(text)
        return 0
    if args.command == "tune":
        from einc.tune.command import parse_duration, tune_file_command

        budget = args.time_budget
        result = tune_file_command(
            args.file, args.target, args.trials, args.db, output=args.output,
            time_budget_s=parse_duration(budget, argument_location(argv, "--time-budget")) if budget else None,
            workers=args.workers, threads=args.threads, policy=args.strategy, resume=args.resume,
            seed=args.seed, report=args.report, progress=not args.quiet, runner=args.runner,
            runner_at=argument_location(argv, "--runner"), early_stop=args.early_stop,
            early_stop_at=argument_location(argv, "--early-stop"), transfer=not args.no_transfer,
            model=args.model, model_at=argument_location(argv, "--model"),
        )  # fmt: skip
        from einc.tune.program import ProgramResult

        if isinstance(result, ProgramResult):  # a program of several kernels, tuned as tasks
            return 130 if result.stopped == "interrupted" else 0 if result.after is not None and result.after.ok else 1
        if result.decision is not None:  # 1 where not even the default schedule computed right numbers
            from einc.tune.tuner import DISQUALIFYING

            return 1 if result.best is None or result.best.status in DISQUALIFYING else 0
        return 130 if result.stopped == "interrupted" else 1
    if args.command == "explain":
        from einc.tools.explain.command import explain_file_command, write_page

        page = explain_file_command(args.file, args.target, args.schedule, args.seed, args.shape_scale,
                                    use_records=not args.no_records, db=args.db, extra_passes=extra)  # fmt: skip
        try:
            write_page(page.html, args.output)
        except OSError as err:
            raise UsageError(f"cannot write the page: {err.strerror or err}", argument_location(argv, "-o", "--output")) from None
        print(page.summary(args.output), file=sys.stderr)
        return 0 if page.ok else 1
    if args.command == "check":
        checked = jobs.check_file_command(
            args.file, target=args.target, archs=args.arch, schedule=args.schedule,
            use_records=not args.no_records, db=args.db, extra_passes=extra, progress=progress,
            model=args.model, model_at=argument_location(argv, "--model"),
        )  # fmt: skip
        if args.json:
            import json

            print(json.dumps(checked.to_json_dict(), indent=2))
        else:
            print(checked.render())
        return 0 if checked.ok else 1
    if args.command == "serve":
        from einc.tools.serve.app import Settings, default_workers, serve_command

        options = ("host", "port", "workers", "timeout", "max_body", "tune_queue", "max_trials", "tune_workers")
        where = {k: argument_location(argv, f"--{k.replace('_', '-')}") for k in options}
        settings = Settings(args.workers or default_workers(), args.timeout, args.max_body, args.db,
                            tune_queue=args.tune_queue, max_trials=args.max_trials, tune_workers=args.tune_workers)
        return serve_command(args.host, args.port, settings, where)
    if args.command == "sketches":
        from einc.tune.space import describe_sketches

        rule_at = argument_location(argv, "--rule")
        sys.stdout.write(describe_sketches(args.file, args.target, args.rule, rule_at))
        return 0
    report = jobs.run_file_command(
        args.file, target=args.target, schedule=args.schedule, repeat=args.repeat, seed=args.seed,
        use_records=not args.no_records, db=args.db, extra_passes=extra, progress=progress,
    )  # fmt: skip
    print(report.render())
    if not report.ok and args.reproducer:
        from einc.tools.reduce.command import write_for_run

        mismatch = next(line.strip() for line in report.render().splitlines() if line.endswith(" MISMATCH"))
        write_for_run(args, argv, report.seed, mismatch, args.reproducer)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
