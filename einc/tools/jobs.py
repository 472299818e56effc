"""The work of the `einc compile`, `einc run` and `einc check` commands on a program file (the
argument parsing is einc/cli.py): each builds a Compilation (einc.compiler.driver), says which
tuning record it applied, and renders its report."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from einc.compiler.driver import Compilation, read_program
from einc.compiler.records import used_line, used_tasks_line
from einc.errors import SourceLocation, TargetError
from einc.frontend import build_module
from einc.schedule.choice import ScheduleChoice
from einc.semantics.compare import max_error, random_inputs, tolerance
from einc.runtime.openmp import passive_while_loading
from einc.tune.timing import NoiseLimits, Timing, others_cpu, run_queue_wait, system_busy
from einc.tune.workload import module_flops, program_bytes, rate

if TYPE_CHECKING:
    from einc.perfmodel import ModelReport
    from einc.runtime.device import CompileReport


def compile_file_command(
    path: str,
    target: str,
    schedule: str | None = None,
    dump_after: str | None = None,
    manifest_path: str | None = None,
    use_records: bool = True,
    db: str | None = None,
    extra_passes: Mapping[str, Sequence[str]] | None = None,
    progress: Callable[[str, float], None] | None = None,
    print_debuginfo: bool = False,
    model: str | None = None,
    model_at: SourceLocation | None = None,
) -> str:
    """The source (or, with `dump_after`, the IR after that stage, each op's location
    printed with `print_debuginfo`). `model`: the device whose modelled tuning records stand
    in where no measured one applies (`einc tune --model`)."""
    if model is not None:
        from einc.perfmodel import get_device

        get_device(model, model_at)  # an unknown device before any work
    comp = Compilation(read_program(path), path, target=target, schedule=ScheduleChoice.read(schedule),
                       use_records=use_records, db=db, extra_passes=extra_passes or {},
                       progress=progress, model=model)  # fmt: skip
    result = comp.run_until(dump_after or "source")
    say_record(comp)
    if manifest_path is not None and dump_after is None:
        write_manifest(comp, manifest_path)
    text = str(result) if isinstance(result, str) or not print_debuginfo else print_ir(result, debuginfo=True)
    return text if text.endswith("\n") else text + "\n"


def print_ir(module: ModuleOp, debuginfo: bool = False) -> str:
    """`module` as text (xDSL's printer, as `str(module)`), with each op's `loc(...)` when
    `debuginfo`."""
    import io

    from xdsl.printer import Printer

    out = io.StringIO()
    Printer(stream=out, print_debuginfo=debuginfo).print_op(module)
    return out.getvalue()


def say_record(comp: Compilation) -> None:
    """Tell the command's user (stderr) which tuning record the compilation applied."""
    if comp.record is not None and comp.record_db is not None:
        print(used_line(comp.record, comp.record_db), file=sys.stderr)
    elif comp.task_records and comp.record_db is not None:
        print(used_tasks_line([r for _, r in comp.task_records], comp.task_count, comp.record_db), file=sys.stderr)


def write_manifest(comp: Compilation, path: str) -> None:
    """A device target's launch manifest (JSON), for hosts that launch the source's
    kernels; targets without one (C) write nothing."""
    manifest = comp.target_obj.manifest(comp.module("target"))
    if manifest is not None:
        Path(path).write_text(manifest.to_json() + "\n")


@dataclass
class RunReport:
    name: str
    target: str
    errors: dict[str, float]
    tolerances: dict[str, float]
    times: list[float]
    """Each timed run's seconds."""
    compile_s: float
    seed: int
    rate: tuple[float, str] | None = None
    """The median's GFLOP/s or GB/s (`einc.tune.workload.rate`), None where not meaningful."""
    cpu_s: float = 0.0
    """CPU time of all the process's threads during the timed runs (with `wall_s`, `wait_s`:
    the load signals of `einc.tune.timing.NoiseLimits`)."""
    wall_s: float = 0.0
    wait_s: float | None = None
    """Seconds the process's threads waited for a core during the timed runs (None: unknown)."""
    others_s: float | None = None
    """CPU seconds other processes took during the timed runs (`einc.tune.timing.others_cpu`;
    None: unknown): only the wait they account for is load."""
    wait_policy: str = ""
    """How the kernel's OpenMP threads wait (`einc.runtime.openmp`), "" where none ran."""

    @property
    def ok(self) -> bool:
        return all(self.errors[k] <= self.tolerances[k] for k in self.errors)

    @property
    def median_s(self) -> float:
        return float(np.median(self.times))

    def timing(self) -> Timing:
        """The timed runs as the tuner's noise rules read a measurement."""
        return Timing(tuple(self.times), self.cpu_s, self.wall_s, self.wait_s, self.others_s)

    @property
    def noise(self) -> str:
        """Why the timings are not to be trusted ("" when they look clean)."""
        return NoiseLimits().noise(self.timing())

    def timing_lines(self) -> list[str]:
        """The run time: median, spread (quartiles, min and max), rate, and a warning when noisy."""
        ms = [t * 1e3 for t in self.times]
        line = f"  compile {self.compile_s * 1e3:.1f} ms, run {self.median_s * 1e3:.3f} ms (median of {len(ms)}"
        if len(ms) > 1:
            q1, q3 = np.percentile(ms, [25, 75])
            line += f"; quartiles {q1:.3f}-{q3:.3f} ms, min {min(ms):.3f}, max {max(ms):.3f}"
        line += ")"
        if self.rate is not None:
            line += f", {self.rate[0]:.2f} {self.rate[1]}"
        lines = [line]
        if len(ms) < 5:
            lines.append(f"  note: {len(ms)} timed run{'s' if len(ms) > 1 else ''}: too few for a spread (--repeat)")
        if noise := self.noise:
            policy = f"; OpenMP threads wait: {self.wait_policy}" if self.wait_policy else ""
            lines.append(f"  warning: noisy timings ({noise}{policy}): the machine is busy or the runs vary; "
                         "compare times on a quiet machine, with more --repeat")  # fmt: skip
        return lines

    def render(self) -> str:
        lines = [f"{self.name}: target {self.target}, inputs seeded with {self.seed}"]
        for out, err in self.errors.items():
            verdict = "ok" if err <= self.tolerances[out] else "MISMATCH"
            lines.append(
                f"  {out}: max error {err:.3e} vs the NumPy float64 reference "
                f"(tolerance {self.tolerances[out]:.1e}) {verdict}"
            )
        lines.extend(self.timing_lines())
        return "\n".join(lines)


def run_file_command(
    path: str,
    target: str,
    schedule: str | None = None,
    repeat: int = 5,
    seed: int | None = None,
    use_records: bool = True,
    db: str | None = None,
    extra_passes: Mapping[str, Sequence[str]] | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> RunReport:
    comp = Compilation(read_program(path), path, target=target, schedule=ScheduleChoice.read(schedule),
                       use_records=use_records, db=db, extra_passes=extra_passes or {},
                       progress=progress)  # fmt: skip
    start = time.perf_counter()
    with passive_while_loading() as wait_policy:  # libgomp reads it when the kernel loads it
        kernel = comp.kernel()
    compile_s = time.perf_counter() - start
    say_record(comp)
    if seed is None:
        entropy = np.random.SeedSequence().entropy  # drawn from the OS: an int
        assert isinstance(entropy, int)
        seed = entropy % (1 << 32)
    arrays = random_inputs(comp.program, np.random.default_rng(seed))
    outputs = kernel(**arrays)
    from einc.semantics.reference import run_reference  # its interpreter's imports: only when a run checks

    reference = run_reference(build_module(comp.program), arrays)  # the program's, not an `ein` hook's
    errors = {k: max_error(v, reference[k]) for k, v in outputs.items()}
    tols = {o.name: tolerance(o.dtype) for o in comp.program.outputs}
    times: list[float] = []
    q0, b0, c0, w0 = run_queue_wait(), system_busy(), time.process_time(), time.perf_counter()
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        kernel(**arrays)
        times.append(time.perf_counter() - t0)
    w1, c1, b1, q1 = time.perf_counter(), time.process_time(), system_busy(), run_queue_wait()
    median = float(np.median(times))
    flops, nbytes = module_flops(comp.module("ein")), program_bytes(comp.program)
    return RunReport(Path(path).stem, target, errors, tols, times, compile_s, seed,
                     rate=rate(flops, nbytes, median) if flops or nbytes else None, cpu_s=c1 - c0, wall_s=w1 - w0,
                     wait_s=None if q0 is None or q1 is None else q1 - q0,
                     others_s=others_cpu(None if b0 is None or b1 is None else b1 - b0, c1 - c0, w1 - w0),
                     wait_policy=wait_policy if comp.target_obj.openmp else "")  # fmt: skip


@dataclass
class CheckReport:
    name: str
    target: str
    reports: list[CompileReport]
    problems: list[str]
    model: ModelReport | None = None
    """The performance model's report (`einc check --model DEVICE`), if asked for."""

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.reports) and not self.problems and not (self.model and self.model.problems)

    def render(self) -> str:
        lines: list[str] = []
        if self.reports or self.model is None:
            lines.append(f"{self.name}: target {self.target}, compile-checked with the real toolchain")
        for report in self.reports:
            lines.append(f"  {report.arch}: {'compiled' if report.ok else 'FAILED'}, {report.binary_bytes} B binary")
            for k in report.kernels:
                lines.append(
                    f"    {k.name}: {k.registers} registers, {k.spills} B spills, "
                    f"{k.shared_bytes} B shared"
                )
        if self.model is not None:
            lines.append(self.model.render(self.name))  # with its own problems
        lines += [f"  problem: {p}" for p in self.problems]
        if self.ok:
            lines.append("  resources within the launch's limits")
        return "\n".join(lines)

    def to_json_dict(self) -> dict[str, object]:
        return {
            "name": self.name, "target": self.target, "ok": self.ok,
            "compiled": [r.to_json_dict() for r in self.reports], "problems": self.problems,
            "model": self.model.to_json_dict() if self.model is not None else None,
        }  # fmt: skip


def check_file_command(
    path: str,
    target: str,
    archs: Sequence[str] | None = None,
    schedule: str | None = None,
    use_records: bool = True,
    db: str | None = None,
    extra_passes: Mapping[str, Sequence[str]] | None = None,
    progress: Callable[[str, float], None] | None = None,
    model: str | None = None,
    model_at: SourceLocation | None = None,
) -> CheckReport:
    """Compile a program's device code with the target's real compiler for each architecture
    and check the reported resources against the launch: no register spills, static shared
    memory within the target's limit, registers x threads per block within the register file.
    `schedule`: as `einc compile --schedule` (a file, `none`, `default`; None: the best tuning
    record, else the target's default schedule). `model`: a device the performance model
    knows, or a JSON file describing one (einc.perfmodel; errors located at `model_at`): the
    report then holds the model of every kernel on it, and the compile check (on a target that
    has one) builds for the device's architecture unless `archs` are given."""
    from einc.perfmodel import get_device, model_module
    from einc.perfmodel.model import compatible
    from einc.targets import get_all_targets, get_target
    from einc.targets.gpu import DeviceTarget

    where = SourceLocation(path, 1, 1)
    device = get_device(model, model_at) if model is not None else None
    target_class = get_target(target, where)
    spec = target_class.compile_check
    if device is not None and target_class.limits is None:
        modelled = [n for n, t in get_all_targets().items() if t().limits is not None]
        raise TargetError(
            f"'einc check --model' models the kernels of device targets ({', '.join(modelled)}); "
            f"the {target} target has none", where,
        )  # fmt: skip
    if spec is None and device is None:
        checked = [n for n, t in get_all_targets().items() if t().compile_check is not None]
        raise TargetError(
            f"'einc check' compile-checks {', '.join(checked)} (and models any device target with "
            f"--model DEVICE); run the {target} target with 'einc run'",
            where,
        )
    comp = Compilation(read_program(path), path, target=target, schedule=ScheduleChoice.read(schedule),
                       use_records=use_records, db=db, extra_passes=extra_passes or {},
                       progress=progress, model=model)  # fmt: skip
    source = comp.source_text()
    say_record(comp)
    device_target = comp.target_obj
    assert issubclass(device_target, DeviceTarget), device_target  # checked and modelled targets are device targets
    manifest = device_target.manifest(comp.module("target"))
    limits = device_target.description()
    reports: list[CompileReport] = []
    problems: list[str] = []
    if spec is not None:
        if not archs and device is not None:
            archs = [device.arch] if compatible(device.arch, spec.archs) else None
        check = spec.checker()
        for arch in archs or spec.archs:
            report = check(source, manifest, arch).check()
            reports.append(report)
            for launch in manifest.kernels:
                res = report.kernel(launch.name)
                threads = launch.block[0] * launch.block[1] * launch.block[2]
                if res.spills:
                    problems.append(f"{arch} {launch.name}: {res.spills} bytes of register spills")
                if res.shared_bytes > limits.shared_bytes_per_block:
                    problems.append(
                        f"{arch} {launch.name}: {res.shared_bytes} B shared memory "
                        f"(limit {limits.shared_bytes_per_block})"
                    )
                if res.registers * threads > spec.register_file:
                    problems.append(
                        f"{arch} {launch.name}: {res.registers} registers x {threads} threads "
                        f"exceeds the register file ({spec.register_file})"
                    )
    modelled = None
    if device is not None:
        modelled = model_module(comp.module("target"), device, device_target, source=source, manifest=manifest)
    return CheckReport(Path(path).stem, target, reports, problems, modelled)
