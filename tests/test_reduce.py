"""Reproducers, their replay, `einc reduce`, pass statistics and debug counters (einc.tools.reduce,
einc.ir.pass_statistics; docs/RESEARCH.md).

The end-to-end tests go from discovery to a reduced reproducer with two commands, through real
plugin files (examples/plugins/wrong_pass.py, benchmarks/reducer/passes/), each reduction small
and with a CPU-time budget; the 20-pass benchmark lives in benchmarks/reduce_suite.py."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.dialects import arith
from xdsl.passes import ModulePass, PassPipeline
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from einc.compiler.driver import Compilation
from einc.dialects.context import make_context
from einc.ir.pass_statistics import Statistics, instrumenting, parse_counters, requested
from einc.tools.reduce import program as prog
from einc.tools.reduce import tester as testing
from einc.tools.reduce.reducer import ein_ops, split_pipeline
from einc.tools.reduce.reproducer import Failure, Plugin, Reproducer, same_way
from einc.tools.reduce.schedule_edits import bypass_edits, count_ops, schedule_ops, without, without_statements

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
WRONG = "examples/plugins/wrong_pass.py"
PASSES = ROOT / "benchmarks" / "reducer" / "passes"
SOFTMAX = "examples/softmax.ein"


def cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], check=False, capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)  # fmt: skip


# ---- pass statistics and debug counters ------------------------------------------------------


class AddToSub(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.AddfOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, arith.SubfOp(op.lhs, op.rhs))


class WrongAdd(ModulePass):
    name = "wrong-add"

    def apply(self, ctx, op):  # noqa: ANN001, ANN201
        PatternRewriteWalker(AddToSub()).rewrite_module(op)


@pytest.fixture(scope="module")
def layernorm_loops():
    return Compilation((ROOT / "examples/layernorm.ein").read_text(), "ln.ein", use_records=False).module("loops")


def count(module, name: str) -> int:  # noqa: ANN001
    return sum(1 for op in module.walk() if op.name == name)


def test_statistics_count_a_pattern_pass_and_hooks_are_off_outside(layernorm_loops) -> None:  # noqa: ANN001
    apply, rewrite_region = PassPipeline.apply, PatternRewriteWalker.rewrite_region
    module = layernorm_loops.clone()
    adds = count(module, "arith.addf")
    with instrumenting(Statistics()) as stats:
        assert PassPipeline.apply is not apply
        PassPipeline((WrongAdd(),)).apply(make_context(), module)
    assert (PassPipeline.apply, PatternRewriteWalker.rewrite_region) == (apply, rewrite_region)  # off: xDSL's own
    counts = stats.passes["wrong-add"]
    assert counts.runs == 1 and counts.created == adds and counts.erased == adds
    assert counts.patterns["AddToSub"].rewrites == adds and counts.patterns["AddToSub"].replaced == adds
    text = stats.render()
    assert "'wrong-add' (1 run" in text and f"(S) {adds} rewrites" in text and "AddToSub" in text


@pytest.mark.parametrize(("spec", "applied"), [("wrong-add-count=1", [0]), ("wrong-add-skip=1,wrong-add-count=2", [1, 2]),
                                               ("wrong-add-skip=2", [2, 3, 4, 5]), ("wrong-add-count=0", [])])  # fmt: skip
def test_debug_counter_applies_only_the_rewrites_it_names(layernorm_loops, spec: str, applied: list[int]) -> None:  # noqa: ANN001
    """The 4 additions of the layer norm: a skipped rewrite is offered again when the walker
    goes over the module again (its next round), and counted again, as in MLIR's driver."""
    module = layernorm_loops.clone()
    adds = count(module, "arith.addf")
    with instrumenting(Statistics(parse_counters(spec), record=True)) as stats:
        PassPipeline((WrongAdd(),)).apply(make_context(), module)
    done = sorted({r.index for r in stats.passes["wrong-add"].rewrites if r.applied})
    assert adds == 4 and done == applied
    assert count(module, "arith.addf") == adds - len(done)


def test_counter_specs_are_checked() -> None:
    assert parse_counters("a-b-skip=2, a-b-count=-1")["a-b"].skip == 2
    for bad in ("canonicalize=2", "cse-skip=-1", "cse-count=-2", "cse-skip=x"):
        with pytest.raises(ValueError, match="skip|count"):
            parse_counters(bad)
    assert requested(False, []) is None


def test_pass_statistics_and_debug_counter_on_the_command_lines() -> None:
    stats = cli("einc", "compile", SOFTMAX, "--no-records", "--pass-statistics", "-o", "/dev/null")
    assert stats.returncode == 0, stats.stderr
    assert "Pass statistics report" in stats.stderr and "'convert-ein-to-affine' (1 run" in stats.stderr
    assert "LowerEinsum" in stats.stderr  # a pattern of convert-ein-to-affine, counted through the rewriter
    plugin = str(PASSES / "canonicalize_sub.py")
    base = ["einc-opt", "examples/layernorm.ein", "--load-pass-plugin", plugin, "-p", "convert-ein-to-affine,canonicalize-sub"]
    whole, none = cli(*base), cli(*base, "--debug-counter=canonicalize-sub-count=0", "--pass-statistics")
    assert whole.returncode == 0 and none.returncode == 0, none.stderr
    assert whole.stdout.count("arith.subf") == none.stdout.count("arith.subf") and whole.stdout != none.stdout
    assert "debug counter: skip=0 count=0" in none.stderr and "stopped by the debug counter" in none.stderr
    bad = cli("einc-opt", SOFTMAX, "-p", "cse", "--debug-counter", "cse-skop=1")
    assert bad.returncode == 1 and "--debug-counter" in bad.stderr and "Traceback" not in bad.stderr


def test_check_numerics_names_the_first_wrong_rewrite() -> None:
    """canonicalize-sub applies two right patterns and a wrong one; the walk bisects the guilty
    pass by its rewrites with a debug counter and names the wrong pattern's first rewrite."""
    run = cli("einc-opt", "examples/layernorm.ein", "--load-pass-plugin", str(PASSES / "canonicalize_sub.py"),
              "-p", "convert-ein-to-affine,canonicalize-sub,cse", "--check-numerics")  # fmt: skip
    assert run.returncode == 1
    line = next(x for x in run.stdout.splitlines() if "the first rewrite that changes them" in x)
    assert "pattern SubBroadcastTurned, on arith.subf at examples/layernorm.ein:" in line
    assert "--debug-counter=canonicalize-sub-count=" in line


# ---- reproducers -------------------------------------------------------------------------------


def test_reproducer_text_round_trips_and_bad_text_is_located() -> None:
    repro = Reproducer(
        "compile", "p.ein", "input a: float32[4]\nb[N] = a[N] + 1.0\n",
        Failure("numerics", "loops", "flip-subf", "wrong numbers", "b: max abs error 1", "detail\n--- x ---\n"),
        target="c", schedule="transform.named_sequence @__transform_main(%r: !transform.any_op) {\n  transform.yield\n}\n",
        hooks=(("loops", "flip-subf"), ("target", "cse")), target_pipeline="", plugins=(Plugin("w.py", "x = 1\n"),),
        seed=3, shape_scale=0.25, tolerance=1e-3, check_numerics=True, command="einc compile p.ein",
    )  # fmt: skip
    text = repro.render()
    again = Reproducer.parse(text, "r.txt")
    assert again == repro and again.render() == text and again.failure.detail == repro.failure.detail
    with pytest.raises(Exception, match=r"r.txt:1:1: error: not a reproducer"):
        Reproducer.parse("hello\n", "r.txt")
    with pytest.raises(Exception, match=r"r.txt:3:1: error: not a reproducer: line 3"):
        Reproducer.parse("einc reproducer (x)\nkind: crash\n???\n", "r.txt")


def test_same_way_compares_kind_step_and_error() -> None:
    want = Failure("crash", "loops", "p", "KeyError", "'x' at 12")
    assert same_way(Failure("crash", "loops", "p", "KeyError", "'x' at 12"), want)
    assert same_way(Failure("crash", "loops", "p", "KeyError", "'y' at 3"), want, loose=True)
    assert not same_way(Failure("crash", "loops", "p", "KeyError", "'y' at 3"), want)
    assert not same_way(Failure("crash", "loops", "q", "KeyError", "'x' at 12"), want)
    assert not same_way(Failure("error", "loops", "p", "KeyError", "'x' at 12"), want)
    assert same_way(Failure("numerics", "x", "p", "wrong numbers", "1"), Failure("numerics", "y", "p", "wrong numbers", "2"),
                    stage=False)  # fmt: skip


# ---- the reducer's edits -----------------------------------------------------------------------

MNIST_LIKE = """input x: float32[4, 8]
input w: float32[8, 6]
input b: float32[6]

h[N, M] +=! x[N, K] * w[K, M]
r[N, M] = (h[N, M] + b[M]).call(`max`, [0.0])
"""


def test_cutting_a_statement_makes_its_tensor_an_input() -> None:
    cut = prog.cut_statements(MNIST_LIKE, "m.ein", [1])
    assert cut is not None and "input h: float32[4, 6]" in cut and "h[N, M] +=!" not in cut
    assert prog.statement_count(prog.drop_unused_inputs(cut, "m.ein"), "m.ein") == 1
    assert "input x:" not in prog.drop_unused_inputs(cut, "m.ein")
    assert prog.cut_statements(MNIST_LIKE, "m.ein", []) is None


def test_expression_edits_keep_the_program_checkable() -> None:
    from einc.frontend import parse_program

    edits = list(prog.expression_edits(MNIST_LIKE, "m.ein"))
    assert any("r[N, M] = (h[N, M] + b[M])" in e or "r[N, M] = h[N, M] + b[M]" in e for e in edits)
    checked = 0
    for edit in edits:
        try:
            parse_program(edit, "m.ein")
            checked += 1
        except Exception:  # noqa: BLE001 - some edits are refused, as they may be
            pass
    assert checked >= len(edits) // 2
    # an axis that loses the access giving it a range gets a `where` range of its size
    conv = "input a: float32[6]\ninput k: float32[3]\nc[H] +=! a[H + K] * k[K] where H in 4\n"
    assert any("c[H] +=! a[H + K] where H in 4, K in 3" in e for e in prog.expression_edits(conv, "c.ein"))
    assert "c[] +=! a[H + K] * k[K] where H in 4\n" in list(prog.axis_edits(conv, "c.ein"))[0]


def test_resizing_keeps_equal_dimensions_equal() -> None:
    resized = prog.resize(MNIST_LIKE, "m.ein", 8, 2)
    assert "x: float32[4, 2]" in resized and "w: float32[2, 6]" in resized
    assert prog.dimension_values(MNIST_LIKE, "m.ein") == [8, 6, 4]


SCHEDULE = """transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "h" axis "N" in %root
  %m = transform.einc.match stmt "h" axis "M" in %root
  %t = transform.einc.knob "h.tile" = 4 from [2, 4]
  %mo, %mi = transform.einc.tile %m by %t
  %a, %b = transform.einc.reorder %n, %mo
  transform.einc.parallelize %a
  %r = transform.einc.match stmt "r" axis "M" in %root
  transform.einc.vectorize %r
  transform.yield
}
"""


def test_schedule_edits_take_ops_out_with_their_users() -> None:
    ops = schedule_ops(SCHEDULE)
    assert count_ops(SCHEDULE) == 8 and [bool(op.defines) for op in ops][:2] == [True, True]
    assert count_ops(without(SCHEDULE, ops, {1})) == 4  # %m, the tile, the reorder, the parallelize go
    assert count_ops(without_statements(SCHEDULE, {"r"})) == 6
    bypassed = list(bypass_edits(SCHEDULE))
    assert any("transform.einc.tile %m by 4" in b and "knob" not in b for b in bypassed)  # the knob's value inlined
    assert any("transform.einc.parallelize %n" in b and "reorder" not in b for b in bypassed)
    assert split_pipeline('a,b{x="1,2" y={3}},c') == ["a", 'b{x="1,2" y={3}}', "c"]


def test_tester_answers_the_first_interesting_candidate_whatever_order_children_end() -> None:
    candidates = [dataclasses.replace(_small_repro(), seed=s) for s in (5, 1, 4, 2, 3)]

    def interesting(repro: Reproducer) -> bool:
        import time

        time.sleep(0.05 * repro.seed)  # the later candidates finish first
        return repro.seed in (4, 2)

    tester = testing.Tester(interesting, jobs=2, budget=testing.Budget(60.0))
    assert tester.first(candidates) == 2
    assert tester.first(candidates[3:]) == 0 and tester.first(candidates[:2]) is None


def _small_repro() -> Reproducer:
    return Reproducer("compile", "p.ein", MNIST_LIKE, Failure("crash", "loops", "x", "E", ""), target="c")


# ---- end to end: discovery -> reproducer -> reduced reproducer, two commands ---------------------


def test_a_numeric_mismatch_goes_from_discovery_to_a_reduced_reproducer(tmp_path: Path) -> None:
    found = tmp_path / "found.txt"
    discover = cli("einc", "compile", SOFTMAX, "--no-records", "--load-pass-plugin", WRONG, "--pipeline-hook",
                   "loops=flip-subf", "--check-numerics", "--reproducer", str(found))  # fmt: skip
    assert discover.returncode == 1 and found.exists(), discover.stderr
    repro = Reproducer.read(str(found))
    assert (repro.failure.kind, repro.failure.stage, repro.failure.step) == ("numerics", "loops", "flip-subf")
    assert repro.shape_scale == 0.25 and repro.schedule is not None and repro.plugins[0].source
    small = tmp_path / "small.txt"
    reduced = cli("einc", "reduce", str(found), "-o", str(small), "--time-budget", "40s", "--cpu-time", "--jobs", "2")
    assert reduced.returncode == 0, reduced.stderr
    assert "still fails identically" in reduced.stderr and "the failure is kept" in reduced.stderr
    assert "statements: 3 -> 1" in reduced.stderr and "schedule:" in reduced.stderr
    result = Reproducer.read(str(small))
    ops = ein_ops(result)
    assert ops is not None and ops <= 8 and result.schedule is None and result.shape_scale == 1.0
    assert " - " in result.program and "failure: numerics at flip-subf" in reduced.stdout  # a subtraction is kept
    replay = cli("einc-opt", "--run-reproducer", str(small))
    assert replay.returncode == 0 and "still fails identically" in replay.stdout
    assert "flip-subf [plugin]" in replay.stdout and "is the first that changes the numbers" in replay.stdout


def test_a_crash_goes_from_discovery_to_a_reduced_reproducer_and_replays_identically(tmp_path: Path) -> None:
    """A plugin pass crashing on layer norms (`crash-rsqrt`): the internal error writes its
    reproducer by itself; `einc reduce` shrinks it; replays say `identically`, and the reproducer
    written again from its replay is the same file, byte for byte."""
    plugin = str(PASSES / "crash_rsqrt.py")
    env = {**os.environ, "EINC_REPRO_DIR": str(tmp_path)}
    discover = cli("einc", "compile", "examples/layernorm.ein", "--no-records", "--load-pass-plugin",
                   plugin, "--pipeline-hook", "target=crash-rsqrt", env=env)  # fmt: skip
    assert discover.returncode == 2 and "a reproducer is in" in discover.stderr
    (found,) = tmp_path.glob("einc-crash-*.txt")
    repro = Reproducer.read(str(found))
    assert repro.failure == Failure("crash", "target", "crash-rsqrt", "KeyError", "'math.rsqrt'")
    assert "Traceback" in repro.traceback and "crash_rsqrt.py" in repro.traceback
    from einc.tools.reduce.command import settled

    assert settled(repro).render() == found.read_text()  # the replay makes the same file
    small = tmp_path / "small.txt"
    reduced = cli("einc", "reduce", str(found), "-o", str(small), "--time-budget", "40s", "--cpu-time", "--jobs", "2")
    assert reduced.returncode == 0, reduced.stderr
    result = Reproducer.read(str(small))
    assert result.failure.signature() == repro.failure.signature()
    ops = ein_ops(result)
    assert ops is not None and ops <= 10 and "rsqrt" in result.program
    replay = cli("einc-opt", "--run-reproducer", str(small))
    assert replay.returncode == 0 and "still fails identically: internal error at crash-rsqrt" in replay.stdout


def test_a_verifier_failure_and_a_refusal_are_reproduced(tmp_path: Path) -> None:
    verifier = tmp_path / "v.txt"
    run = cli("einc-opt", "examples/layernorm.ein", "--load-pass-plugin", str(PASSES / "mulf_to_f64.py"),
              "-p", "convert-ein-to-affine,mulf-to-f64", "--reproducer", str(verifier))  # fmt: skip
    assert run.returncode == 1 and "does not verify" in run.stderr
    repro = Reproducer.read(str(verifier))
    assert (repro.mode, repro.failure.kind, repro.failure.step) == ("opt", "verifier", "mulf-to-f64")
    assert cli("einc-opt", "--run-reproducer", str(verifier)).returncode == 0
    refusal = tmp_path / "e.txt"
    run = cli("einc", "compile", "examples/mnist.ein", "--no-records", "--load-pass-plugin",
              str(PASSES / "refuse_long_reduction.py"), "--pipeline-hook", "loops=refuse-long-reduction",
              "--reproducer", str(refusal))  # fmt: skip
    assert run.returncode == 1 and "exceed this target's limit" in run.stderr
    repro = Reproducer.read(str(refusal))
    assert (repro.failure.kind, repro.failure.error, repro.failure.step) == ("error", "TargetError", "refuse-long-reduction")
    replay = cli("einc-opt", "--run-reproducer", str(refusal))
    assert replay.returncode == 0 and "still fails identically" in replay.stdout


def test_a_reproducer_that_no_longer_fails_says_so(tmp_path: Path) -> None:
    path = tmp_path / "r.txt"
    repro = Reproducer("compile", "p.ein", MNIST_LIKE, Failure("crash", "loops", "cse", "KeyError", "x"), target="c")
    repro.write(path)
    replay = cli("einc-opt", "--run-reproducer", str(path))
    assert replay.returncode == 1 and "no longer fails" in replay.stdout
    assert cli("einc", "reduce", str(path)).returncode == 1


# ---- the `ein` stage's hooks are steps, not the oracle --------------------------------------------


def test_an_ein_hook_is_checked_against_the_program_not_against_itself() -> None:
    """Before, the oracle (and `einc run`'s reference) was the ein module after the `ein` stage's
    hooks: a wrong pass there agreed with itself."""
    plugin = str(PASSES / "divide_as_multiply.py")
    args = ["examples/layernorm.ein", "--no-records", "--load-pass-plugin", plugin, "--pipeline-hook", "ein=divide-as-multiply"]
    check = cli("einc", "compile", *args, "--check-numerics")
    assert check.returncode == 1 and "plugin 'divide-as-multiply'" in check.stdout
    run = cli("einc", "run", *args, "--repeat", "1", "--seed", "1")
    assert run.returncode == 1 and "MISMATCH" in run.stdout


def test_the_first_wrong_rewrite_is_on_the_explain_page_and_in_run_reproducers(tmp_path: Path) -> None:
    from einc.compiler.registry import load_pass_plugin
    from einc.tools.explain import render_page
    from einc.tools.numerics import check_pipeline

    load_pass_plugin(str(ROOT / "examples/plugins/wrong_rewrites.py"))
    text = (ROOT / "examples/layernorm.ein").read_text()
    report = check_pipeline(text, "layernorm.ein", "convert-ein-to-affine,simplify-sub", target=None)
    assert report.first_bad == 2 and report.steps[2].rewrite is not None
    assert "rewrite 3 of 3 (pattern TurnBroadcastSub" in report.steps[2].rewrite
    assert "the first rewrite that changes them: rewrite 3 of 3" in render_page(report)
    # `einc run`'s mismatch: the reproducer's failure is the step the walk finds
    found = tmp_path / "run.txt"
    run = cli("einc", "run", SOFTMAX, "--no-records", "--load-pass-plugin", WRONG, "--pipeline-hook", "loops=flip-subf",
              "--repeat", "1", "--seed", "3", "--reproducer", str(found))  # fmt: skip
    assert run.returncode == 1 and "MISMATCH" in run.stdout
    repro = Reproducer.read(str(found))
    assert (repro.failure.kind, repro.failure.step, repro.seed, repro.check_numerics) == ("numerics", "flip-subf", 3, True)
