"""A reproducer: one self-contained text file that replays a failure einc reported.

    einc reproducer (einc 0.1.0): numerics at plugin pass 'flip-subf'
    # replay: einc-opt --run-reproducer FILE   shrink: einc reduce FILE
    kind: numerics
    stage: loops
    step: flip-subf
    error: wrong numbers
    message: output0: max abs error 1.437e-02 ...
    mode: compile
    program: examples/softmax.ein
    target: c
    schedule: none
    hook: loops=flip-subf
    plugin: examples/plugins/wrong_pass.py
    seed: 0
    shape-scale: 1/4
    tolerance: dtype
    command: einc compile examples/softmax.ein ...
    --- program ---
    input input0: float32[64, 1024]
    ...
    --- end of program ---
    --- plugin examples/plugins/wrong_pass.py ---
    ...
    --- end of plugin examples/plugins/wrong_pass.py ---

`mode: compile` replays einc compile's pipeline (the frontend, convert-ein-to-affine, the
schedule op by op, the target's pipeline, the stage hooks, the printer and the printed source);
`mode: opt` replays einc-opt's (`pipeline:` over the program or IR, verified after each pass).
The failure is `kind` (crash: an internal error; verifier: IR that does not verify after a
pass; error: a located refusal; numerics: a `--check-numerics` mismatch) at `step` of `stage`
(a pass name, a schedule op's name, `frontend`, `printer`), with `error` (the exception's
class, or `wrong numbers` / `execution crashed`) and the first line of its `message`.
Plugins are named by their path and carried whole (a replay loads the file at the path when
it is there, else the copy). Everything is text: the file is read and written by this module
alone, byte for byte the same for the same reproducer.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path

from einc.errors import SourceLocation, UsageError, einc_version

KINDS = ("crash", "verifier", "error", "numerics")
MODES = ("compile", "opt")
_HEADER = re.compile(r"([a-z][a-z-]*): ?(.*)")
_SECTION = re.compile(r"--- (.+) ---")


@dataclass(frozen=True)
class Failure:
    """What went wrong: its kind, where (the stage and the step: a pass, a schedule op, the
    frontend or the printer), the error's class and the first line of its message; `detail`
    says more (not compared)."""

    kind: str
    stage: str | None
    step: str | None
    error: str
    message: str
    detail: str = field(default="", compare=False)

    def signature(self, loose: bool = False, stage: bool = True) -> tuple[str, ...]:
        """What `same_way` compares: the kind, stage, step and error, and (not `loose`) the
        message; a wrong-numbers message (errors, indices) is never compared. `loose` reads
        numbers and quoted names in the message as placeholders (a reduced program's shapes
        and names differ)."""
        message = "" if self.kind == "numerics" else self.message
        if loose:
            message = re.sub(r"\d+(\.\d+)?(e[+-]?\d+)?", "#", message)
            message = re.sub(r"'[^']*'|\"[^\"]*\"|%[\w.]+", "'…'", message)
        return (self.kind, (self.stage or "") if stage else "", self.step or "", self.error, message)

    def describe(self) -> str:
        where = f" at {self.step}" if self.step else ""
        where += f" (stage {self.stage})" if self.stage else ""
        what = {"crash": "internal error", "verifier": "verifier failure", "error": "error",
                "numerics": "numerics"}.get(self.kind, self.kind)  # fmt: skip
        message = f": {self.message}" if self.message else ""
        return f"{what}{where}: {self.error}{message}"


def same_way(got: Failure | None, want: Failure, loose: bool = False, stage: bool = True) -> bool:
    """Whether `got` is `want`'s failure: same kind, stage, step and error (and message, unless
    `loose`); a `want` without a step matches any step."""
    if got is None:
        return False
    if want.step is None:
        got = replace(got, step=None)
    return got.signature(loose, stage) == want.signature(loose, stage)


@dataclass(frozen=True)
class Plugin:
    """A pass plugin: the path it was loaded from and its source when the reproducer was written."""

    path: str
    source: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:12]

    @classmethod
    def read(cls, path: str) -> Plugin:
        try:
            return cls(path, Path(path).read_text())
        except (OSError, UnicodeDecodeError):
            return cls(path, "")


@dataclass(frozen=True)
class Reproducer:
    """Everything a replay needs (see the module's doc)."""

    mode: str
    filename: str
    program: str
    failure: Failure
    target: str | None = None
    """compile: the target; opt: `-t TARGET` (None: print MLIR, nothing run)."""
    schedule: str | None = None
    """compile: the schedule's text, or None (no schedule)."""
    hooks: tuple[tuple[str, str], ...] = ()
    """compile: (stage, pipeline text) run at the end of a stage (`--pipeline-hook`)."""
    target_pipeline: str | None = None
    """compile: the target's pipeline replaced by this one (the reducer's), None: the target's."""
    pipeline: str = ""
    """opt: the pass pipeline."""
    verify: bool = True
    """opt: verify the IR after each pass (einc-opt's default)."""
    plugins: tuple[Plugin, ...] = ()
    seed: int = 0
    shape_scale: float | None = None
    """The scale the numbers were checked at (None: the default choice); 1: the shapes as written."""
    tolerance: float | None = None
    """The relative tolerance of the numeric checks (None: each output dtype's)."""
    check_numerics: bool = False
    command: str = ""
    """The command that found the failure."""
    traceback: str = ""
    location: str = ""
    """Where an internal error met its exception (`prog.ein:4:1, at memref.copy`)."""

    # ---- text ----------------------------------------------------------------------------
    def render(self) -> str:
        f = self.failure
        lines = [f"einc reproducer (einc {einc_version()}): {f.describe()}".splitlines()[0],
                 "# replay: einc-opt --run-reproducer FILE   shrink: einc reduce FILE"]  # fmt: skip
        head: list[tuple[str, str]] = [
            ("kind", f.kind), ("stage", f.stage or "unknown"), ("step", f.step or "unknown"),
            ("error", f.error), ("message", f.message), ("mode", self.mode), ("program", self.filename),
        ]  # fmt: skip
        if self.target is not None:
            head.append(("target", self.target))
        if self.mode == "compile":
            head.append(("schedule", "none" if self.schedule is None else "below"))
            head += [("hook", f"{stage}={passes}") for stage, passes in self.hooks]
            if self.target_pipeline is not None:
                head.append(("target-pipeline", self.target_pipeline))
        else:
            head += [("pipeline", self.pipeline), ("verify-each-pass", "yes" if self.verify else "no")]
        head += [("plugin", p.path) for p in self.plugins]
        head += [("seed", str(self.seed)), ("shape-scale", _scale_text(self.shape_scale)),
                 ("tolerance", "dtype" if self.tolerance is None else repr(self.tolerance)),
                 ("check-numerics", "yes" if self.check_numerics else "no")]  # fmt: skip
        if self.location:
            head.append(("location", self.location))
        if self.command:
            head.append(("command", self.command))
        lines += [f"{k}: {_one_line(v)}" for k, v in head]
        sections = [("program", self.program)]
        if self.schedule is not None:
            sections.append(("schedule", self.schedule))
        sections += [(f"plugin {p.path}", p.source) for p in self.plugins]
        if f.detail:
            sections.append(("what went wrong", f.detail))
        if self.traceback:
            sections.append(("traceback", self.traceback))
        for name, body in sections:
            body = body if body.endswith("\n") or not body else body + "\n"
            lines.append(f"--- {name} ---\n{body}--- end of {name} ---")
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str, filename: str = "<reproducer>") -> Reproducer:
        """A reproducer's text (as `render` writes it); a UsageError at the line that is not."""
        head: dict[str, list[str]] = {}
        sections: dict[str, str] = {}
        lines = text.splitlines(keepends=True)
        i = 0

        def error(message: str, line: int) -> UsageError:
            return UsageError(f"not a reproducer: {message}", SourceLocation(filename, line, 1, 1, text))

        if not lines or not lines[0].startswith("einc reproducer"):
            raise error("the first line is not 'einc reproducer (...)' (einc writes them with --reproducer)", 1)
        i = 1
        while i < len(lines):
            line = lines[i].rstrip("\n")
            section = _SECTION.fullmatch(line)
            if section is not None:
                name = section.group(1)
                end = f"--- end of {name} ---"
                body: list[str] = []
                j = i + 1
                while j < len(lines) and lines[j].rstrip("\n") != end:
                    body.append(lines[j])
                    j += 1
                if j == len(lines):
                    raise error(f"section '{name}' has no '{end}'", i + 1)
                sections[name] = "".join(body)
                i = j + 1
                continue
            if line.startswith("#") or not line.strip():
                i += 1
                continue
            found = _HEADER.fullmatch(line)
            if found is None:
                raise error(f"line {i + 1} is neither 'key: value' nor a section", i + 1)
            head.setdefault(found.group(1), []).append(found.group(2))
            i += 1

        def one(key: str, default: str | None = None) -> str:
            values = head.get(key)
            if not values:
                if default is None:
                    raise error(f"no '{key}:' line", 1)
                return default
            return values[-1]

        kind, mode = one("kind"), one("mode")
        if kind not in KINDS:
            raise error(f"kind '{kind}' is not one of {', '.join(KINDS)}", 1)
        if mode not in MODES:
            raise error(f"mode '{mode}' is not one of {', '.join(MODES)}", 1)
        if "program" not in sections:
            raise error("no '--- program ---' section", 1)
        hooks = []
        for hook in head.get("hook", []):
            stage, equal, passes = hook.partition("=")
            if not equal:
                raise error(f"hook '{hook}' is not STAGE=PASSES", 1)
            hooks.append((stage.strip(), passes.strip()))
        plugins = tuple(Plugin(path, sections.get(f"plugin {path}", "")) for path in head.get("plugin", []))
        stage, step = one("stage", "unknown"), one("step", "unknown")
        failure = Failure(kind, None if stage == "unknown" else stage, None if step == "unknown" else step,
                          one("error", ""), one("message", ""), sections.get("what went wrong", ""))  # fmt: skip
        try:
            seed = int(one("seed", "0"))
            scale_text = one("shape-scale", "auto")
            scale = None if scale_text == "auto" else float(Fraction(scale_text))
            tol_text = one("tolerance", "dtype")
            tolerance = None if tol_text == "dtype" else float(tol_text)
        except (ValueError, ZeroDivisionError) as err:
            raise error(f"a bad number: {err}", 1) from None
        schedule = sections.get("schedule") if one("schedule", "none") != "none" else None
        return cls(
            mode=mode, filename=one("program", "<program>"), program=sections["program"], failure=failure,
            target=head["target"][-1] if "target" in head else None, schedule=schedule, hooks=tuple(hooks),
            target_pipeline=head["target-pipeline"][-1] if "target-pipeline" in head else None,
            pipeline=one("pipeline", ""), verify=one("verify-each-pass", "yes") == "yes", plugins=plugins,
            seed=seed, shape_scale=scale, tolerance=tolerance, check_numerics=one("check-numerics", "no") == "yes",
            command=one("command", ""), traceback=sections.get("traceback", ""), location=one("location", ""),
        )  # fmt: skip

    @classmethod
    def read(cls, path: str) -> Reproducer:
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"cannot read the reproducer: {err}", SourceLocation(path, 1, 1)) from None
        return cls.parse(text, path)

    def write(self, path: str | Path) -> Path:
        out = Path(path)
        out.write_text(self.render())
        return out

    def with_failure(self, failure: Failure) -> Reproducer:
        return replace(self, failure=failure)


def _one_line(value: str) -> str:
    return value.splitlines()[0] if value.strip() else ""


def _scale_text(scale: float | None) -> str:
    if scale is None:
        return "auto"
    fraction = Fraction(scale).limit_denominator(1 << 16)
    return str(fraction)


def written_name(repro: Reproducer, directory: str | None = None) -> Path:
    """Where an automatic reproducer goes: `einc-crash-<hash>.txt` (an internal error) or
    `einc-repro-<hash>.txt` in `directory` (default: $EINC_REPRO_DIR, else the current one)."""
    import os

    text = repro.render()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    folder = Path(directory or os.environ.get("EINC_REPRO_DIR") or ".")
    prefix = "einc-crash" if repro.failure.kind == "crash" else "einc-repro"
    return folder / f"{prefix}-{digest}.txt"
