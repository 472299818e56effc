"""`einc explain`: the page builder (escaping, diffs, verdicts, folding) on hand-built reports,
the stage walk on real compilations, and the page of a real program opened in a headless
browser (Debian's chromium: scripts/install_toolchains.sh installs it; in CI a missing browser
fails the test instead of skipping it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from einc import cli
from einc.compiler.driver import STAGES
from einc.tools.explain import PageContext, render_page
from einc.tools.explain.diff import diff_stats, inline_diff, side_by_side
from einc.tools.explain.page import OPEN_ALL_UP_TO, schedule_lines
from einc.tools.numerics.types import LevelRun, NumericsReport, OutputCheck, PipelineStep

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SECTIONS = ("nav", "summary", "checks", "steps", "schedule", "source", "times")


class Elements(HTMLParser):
    """Every start tag's attributes, and the document's text."""

    def __init__(self, html: str):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def by_id(self, ident: str) -> tuple[str, dict[str, str]]:
        found = [t for t in self.tags if t[1].get("id") == ident]
        assert len(found) == 1, (ident, len(found))
        return found[0]

    def with_class(self, cls: str) -> list[dict[str, str]]:
        return [a for _, a in self.tags if cls in a.get("class", "").split()]


def ok_run(level: str = "loops") -> LevelRun:
    return LevelRun(level, True, outputs=(OutputCheck("output0", True, 1e-7, 2e-7, 1e-4),), seconds=0.01)


def bad_run() -> LevelRun:
    out = OutputCheck("output0", False, 0.5, 0.25, 1e-4, first_bad_index=(3, 1), got=1.5, want=2.0)
    return LevelRun("loops", True, outputs=(out,), seconds=0.01)


def ir(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def hand_report() -> NumericsReport:
    """frontend ✔, a pass ✔, a transform op ✘ (first bad), an unchanged pass, a printer not run."""
    a = ir(['"builtin.module"() ({', '  %0 = "ein.load"(%x) : (tensor<4xf32>) -> f32', "}) : () -> ()"])
    b = ir(['"builtin.module"() ({', '  %0 = "affine.load"(%x) : (memref<4xf32>) -> f32', "}) : () -> ()"])
    c = ir(['"builtin.module"() ({', '  %0 = "affine.load"(%x) : (memref<8xf32>) -> f32', '  "x.y"() <{s = "a<b&c"}> : () -> ()', "}) : () -> ()"])  # fmt: skip
    steps = [
        PipelineStep(0, "ein", "frontend", "frontend", a, 0.002, True, check=ok_run("ein")),
        PipelineStep(1, "loops", "convert-ein-to-affine", "pass", b, 0.003, True, check=ok_run()),
        PipelineStep(2, "scheduled", 'transform.einc.tile %m by 8', "transform", c, 0.001, True, "s.mlir:3:7", bad_run()),
        PipelineStep(3, "target", "canonicalize", "pass", c, 0.0005, False, check=bad_run()),
        PipelineStep(4, "source", "printer", "printer", "void k(float *x) { x[0] = a < b; }\n", 0.0001, True,
                     check=LevelRun("source:c", False, reason="no C compiler <here>")),
    ]  # fmt: skip
    return NumericsReport("prog<1>.ein", "c", 7, 0.25, steps, first_bad=2)


SCHEDULE = "transform.named_sequence @main(%r: !transform.any_op) {\n  %m = match\n  %o, %i = transform.einc.tile %m by 8\n  transform.yield\n}\n"  # fmt: skip


def hand_page() -> str:
    context = PageContext(program="input x: float32[4]\n", inputs=("x: float32[4]",), outputs=("y: float32[4]",),
                          schedule=SCHEDULE, schedule_origin="s.mlir")  # fmt: skip
    return render_page(hand_report(), context)


# ---- the builder ------------------------------------------------------------------------------------
def test_everything_from_the_report_is_escaped() -> None:
    report = hand_report()
    report.steps[1].ir_after = report.steps[1].ir_after.replace("memref<4xf32>", "memref<4xf32></td><script>alert(1)</script>")
    report.steps[1].name = "evil<b>pass</b>"
    page = render_page(report, PageContext(program="<script>x</script>", schedule="<s>", schedule_origin="<o>"))
    assert page.count("<script>") == 1 and "<script>alert" not in page  # the page's own script only
    assert "evil&lt;b&gt;pass&lt;/b&gt;" in page and "<b>pass" not in page
    assert "prog&lt;1&gt;.ein" in page and "no C compiler &lt;here&gt;" in page
    parsed = Elements(page)
    for section in SECTIONS:
        parsed.by_id(section)
    assert [t for t, _ in parsed.tags].count("script") == 1
    assert "</td><script>alert(1)</script>" in "".join(parsed.text)  # shown as text, intact


def test_side_by_side_marks_changed_words_and_lines() -> None:
    before = ir(["a", "b = f(x) : i32", "c"] + [f"same{i}" for i in range(20)] + ["tail"])
    after = ir(["a", "b = f(y) : i32", "c"] + [f"same{i}" for i in range(20)] + ["tail", "d<e"])
    table = side_by_side(before, after)
    assert "<del>x</del>" in table and "<ins>y</ins>" in table
    assert 'class="ins"' in table and "d&lt;e" in table
    assert "⋯ 16 unchanged lines" in table  # lines 6-21: 3 lines of context around each change
    assert "same10" not in table
    assert side_by_side(before, before) == ""
    stats = diff_stats(before, after)
    assert (stats.added, stats.removed) == (2, 1)


def test_inline_diff_escapes_and_gives_up_on_unrelated_lines() -> None:
    marked = inline_diff("x = a<b", "x = a<c")
    assert marked == ("x = a&lt;<del>b</del>", "x = a&lt;<ins>c</ins>")
    assert inline_diff("completely different", "%0 = arith.addf") is None


def test_replaced_lines_pair_with_their_most_similar_line() -> None:
    before = ir(["x", '%1 = "ein.load"(%a, %N) : f32', "y"])
    after = ir(["x", "affine.for {", "  ^bb0(%i: index):", '  %1 = "affine.load"(%a, %N) : f32', "}", "y"])
    rows = re.findall(r'<tr class="(\w+)">', side_by_side(before, after))
    assert rows.count("chg") == 1 and rows.count("ins") == 3  # the load beside the load, the rest added


def test_failing_step_marked_and_linked_from_the_summary() -> None:
    parsed = Elements(hand_page())
    link = parsed.by_id("first-bad")
    assert link[1]["href"] == "#step-2"
    step = parsed.by_id("step-2")
    assert step[0] == "details" and "bad" in step[1]["class"].split() and "open" in step[1]
    text = "".join(parsed.text)
    assert "✘ first bad step: #2 transform.einc.tile %m by 8" in text
    assert "first bad index [3, 1]: got 1.5, want 2" in text
    bad_rows = [a for a in parsed.with_class("bad") if a.get("class", "").startswith("bad")]
    assert bad_rows  # the checks table's row
    assert "output0[3, 1]" in text
    assert "not executed: no C compiler <here>" in text  # the printer's – and its reason
    assert "✔" in text and "–" in text


def test_transform_op_linked_to_its_schedule_line() -> None:
    page = hand_page()
    parsed = Elements(page)
    row = parsed.by_id("sched-3")
    assert row[1].get("class") == "op"
    assert re.search(r'<tr id="sched-3" class="op">.*?href="#step-2"', page)
    assert 'href="#sched-3"' in page  # and the step's header back to the line


def test_transform_ops_without_locations_matched_to_schedule_lines_in_order() -> None:
    """A schedule printed from memory (the target's default) has no locations: each op goes to
    the next line holding the same op, so two `tile`s land on their own lines."""
    script = ir(["transform.named_sequence @m(%r: !transform.any_op) {", "  %a = transform.einc.match axis", "  %b, %c = transform.einc.tile %a by 4",
                 "  %d, %e = transform.einc.tile %b by 2", "  transform.yield", "}"])  # fmt: skip
    steps = [PipelineStep(0, "loops", "convert-ein-to-affine", "pass", "x\n", 0.0, True)] + [
        PipelineStep(k, "scheduled", name, "transform", f"x{k}\n", 0.0, True)
        for k, name in enumerate(["%0 = transform.einc.match axis", "%0, %1 = transform.einc.tile %2 by %3",
                                  "%0, %1 = transform.einc.tile %2 by %3"], 1)
    ]  # fmt: skip
    assert schedule_lines(steps, script) == {1: 2, 2: 3, 3: 4}
    page = render_page(NumericsReport("p.ein", "c", 0, 1.0, steps), PageContext(schedule=script, schedule_origin="mem"))
    assert re.search(r'<tr id="sched-4" class="op">.*?href="#step-3"', page)
    assert '<span class="nm">tile %2 by %3</span>' in page  # the navigation drops the results and dialect


def test_source_is_highlighted_and_escaped() -> None:
    page = hand_page()
    section = page[page.index('id="source"'):page.index('id="times"')]
    assert 'class="hl"' in section and "&lt;" in section and "a < b" not in section
    own = render_page(hand_report(), PageContext(source="int own_shapes;\n"))  # the compilation's own source wins
    section = own[own.index('id="source"'):own.index('id="times"')]
    assert "own_shapes" in section and "scaled program" in section


def test_many_steps_fold_unchanged_runs_and_stay_closed() -> None:
    """70 steps: runs of unchanged steps fold, changed steps start closed but the first bad one."""
    text = ir(["module", "  op0"])
    steps = [PipelineStep(0, "ein", "frontend", "frontend", text, 0.01, True, check=ok_run("ein"))]
    for k in range(1, 70):
        changed = k % 5 == 0
        if changed:
            text = text + f"  op{k}\n"
        steps.append(PipelineStep(k, "target", f"pass-{k}", "pass", text, 0.001 * (k % 7), changed,
                                  check=bad_run() if k == 45 else ok_run()))  # fmt: skip
    report = NumericsReport("big.ein", "c", 0, 1.0, steps, first_bad=45)
    parsed = Elements(render_page(report))
    for k in range(70):
        parsed.by_id(f"step-{k}")
    groups = [a for t, a in parsed.tags if t == "details" and a.get("class") == "group"]
    assert len(groups) == 14  # 4 unchanged steps between changed ones, 14 times
    opened = [a["id"] for t, a in parsed.tags if t == "details" and "step" in a.get("class", "") and "open" in a]
    assert sum(1 for s in steps if s.changed) > OPEN_ALL_UP_TO and opened == ["step-45"]
    assert len([a for t, a in parsed.tags if t == "li"]) == 70  # every step in the navigation


def test_cli_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.html"
    assert cli.main(["explain", str(EXAMPLES / "matmul.ein"), "-o", str(out), "--no-records"]) == 0
    assert "steps" in capsys.readouterr().err
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert cli.main(["explain", str(EXAMPLES / "matmul.ein"), "-o", str(out), "--shape-scale", "-1"]) == 1
    assert "--shape-scale must be above 0" in capsys.readouterr().err


# ---- in a browser -----------------------------------------------------------------------------------
def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed (scripts/install_toolchains.sh installs it)")
    pytest.skip("no chromium here: `apt-get install chromium` (scripts/install_toolchains.sh) to run the page in a browser")


def browse(page: Path, tmp_path: Path, *flags: str, fragment: str = "") -> subprocess.CompletedProcess[bytes]:
    """Chromium, headless, on its own profile (tests may run side by side)."""
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'profile'}", *flags, page.as_uri() + fragment]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done


@pytest.mark.parametrize("program, target", [("matmul", "c"), ("softmax", "opencl")])
def test_page_in_a_browser(program: str, target: str, tmp_path: Path) -> None:
    from PIL import Image

    page = tmp_path / f"{program}.html"
    assert cli.main(["explain", str(EXAMPLES / f"{program}.ein"), "-t", target, "-o", str(page), "--no-records"]) == 0
    dom = browse(page, tmp_path, "--dump-dom").stdout.decode()
    parsed = Elements(dom)
    steps = len(parsed.with_class("step"))
    assert steps >= len(STAGES) and len([t for t, _ in parsed.tags if t == "li"]) == steps
    assert {"ein", "loops", "target", "source"} <= set(parsed.text)  # the stages' badges
    assert parsed.tags[0][1].get("data-ready") == str(steps)  # the page's script ran to its end
    for section in SECTIONS:
        parsed.by_id(section)
    assert parsed.with_class("diff"), "no side-by-side diff"
    assert parsed.with_class("hl"), "no highlighted source"
    assert any(t == "svg" and "times" in a.get("class", "") for t, a in parsed.tags)
    assert len(parsed.with_class("mark")) >= 2 * steps  # in the navigation and the checks table
    text = "".join(parsed.text)
    assert f"{program}.ein" in text and "Numeric checks" in text and "Final source" in text

    shot = tmp_path / "shot.png"
    browse(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,1600")
    image = Image.open(shot)
    assert image.format == "PNG" and image.size == (1280, 1600)
    gray = np.asarray(image.convert("L"), dtype=np.float64)
    assert gray.std() > 10, "a blank screenshot"
    assert (gray < 200).mean() > 0.01, "almost nothing drawn"


def test_browser_opens_a_folded_step_from_its_link(tmp_path: Path) -> None:
    """Following #step-N to a step folded among unchanged ones opens the fold (the page's script)."""
    page = tmp_path / "hand.html"
    report = hand_report()
    report.steps[3].check = ok_run()
    report.steps.insert(4, PipelineStep(4, "target", "cse", "pass", report.steps[3].ir_after, 0.0, False))
    page.write_text(render_page(report))
    parsed = Elements(browse(page, tmp_path, "--dump-dom", fragment="#step-4").stdout.decode())
    groups = [a for t, a in parsed.tags if t == "details" and a.get("class") == "group"]
    assert len(groups) == 1 and "open" in groups[0]


class AddToSub(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.AddfOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, arith.SubfOp(op.lhs, op.rhs))


class WrongAdd(ModulePass):
    """A deliberately wrong pass: every float addition becomes a subtraction."""

    name = "wrong-add"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(AddToSub()).rewrite_module(op)


def test_page_names_a_miscompiling_pass() -> None:
    """A pass that turns `addf` into `subf`, walked by einc.tools.numerics after the lowering: the
    page's verdict names it, links to it, and its diff marks the changed op."""
    import einc.tools.numerics

    text = (EXAMPLES / "softmax.ein").read_text()
    passes = ["convert-ein-to-affine", "canonicalize", WrongAdd(), "cse"]
    report = einc.tools.numerics.check_pipeline(text, "softmax.ein", passes, seed=0, target="c")
    page = render_page(report)
    parsed = Elements(page)
    bad = report.first_bad
    assert bad is not None and report.steps[bad].name == "wrong-add"
    assert parsed.by_id("first-bad")[1]["href"] == f"#step-{bad}"
    assert all(verdict_css != "bad" for verdict_css in re.findall(r'<li class="(\w+) ', page)[:bad])
    step_html = page[page.index(f'id="step-{bad}"'):]
    step_html = step_html[: step_html.index("</details>")]
    assert "<del>addf</del>" in step_html and "<ins>subf</ins>" in step_html


class DivToMul(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.DivfOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, arith.MulfOp(op.lhs, op.rhs))


class WrongDiv(ModulePass):
    """A second wrong pass: every float division becomes a multiplication."""

    name = "wrong-div"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(DivToMul()).rewrite_module(op)


def test_page_shows_custom_form_and_tells_the_culprit_from_steps_downstream() -> None:
    """wrong-add is the culprit (✘); lower-affine rewrites the loops but keeps its numbers, and
    the C kernel computes them: both inherit its error (↳); wrong-div, later, changes the
    numbers again: ✘ of its own. The IR is in the custom form einc-opt prints."""
    import einc.tools.numerics

    text = (EXAMPLES / "softmax.ein").read_text()
    passes = ["convert-ein-to-affine", "canonicalize", WrongAdd(), "lower-affine", WrongDiv(), "cse"]
    report = einc.tools.numerics.check_pipeline(text, "softmax.ein", passes, seed=0, target="c")
    by_name = {s.name: s for s in report.steps}
    culprit, lowered, again, printed = (by_name[n] for n in ("wrong-add", "lower-affine", "wrong-div", "printer"))
    assert report.first_bad == culprit.index
    checks = [s.check for s in (culprit, lowered, again, printed)]
    assert all(c is not None and c.ran and not c.ok for c in checks), einc.tools.numerics.render(report)
    assert culprit.check is not None and culprit.check.inherits_from is None
    assert lowered.check is not None and lowered.check.inherits_from == culprit.index
    assert lowered.check.previous_step == culprit.index
    assert again.check is not None and again.check.inherits_from is None and again.check.previous_step == lowered.index
    assert printed.check is not None and printed.check.inherits_from == again.index  # (cse between: ↳ too)

    page = render_page(report)
    parsed = Elements(page)
    assert parsed.by_id("first-bad")[1]["href"] == f"#step-{culprit.index}"
    marks = {name: css for css, name in re.findall(r'<li class="(\w+) \w+" data-name="([\w-]+)"', page)}
    assert marks["wrong-add"] == "bad" and marks["wrong-div"] == "bad"
    assert marks["lower-affine"] == "inherited" and marks["printer"] == "inherited"
    assert marks["convert-ein-to-affine"] == "ok"
    row = page[page.index(f'<tr class="inherited"><td class="num"><a href="#step-{lowered.index}">'):]
    assert f"inherits the error of #{culprit.index}" in row[: row.index("</tr>")]
    assert "↳" in row[: row.index("</tr>")]
    summary = page[page.index('id="summary"'):page.index('id="checks"')]
    assert f"#{again.index} wrong-div fails on its own" in summary
    assert "3 later executed steps only carry the error on" in summary  # lower-affine, cse, the printer

    # the IR as einc-opt prints it, not the generic form (several times longer)
    step_html = page[page.index(f'id="step-{culprit.index}"'):]
    step_html = step_html[: step_html.index("</details>")]
    assert "<del>addf</del>" in step_html and "<ins>subf</ins>" in step_html
    assert "affine.for %" in page and '"affine.for"' not in page and '"builtin.module"' not in page
    assert culprit.ir_custom is not None and 2 * len(culprit.ir_custom) < len(culprit.ir_after)
    assert culprit.ir_after.startswith('"builtin.module"() ({')  # the generic form: what `changed` compares


def test_a_step_without_a_custom_form_is_diffed_in_the_generic_form() -> None:
    """Steps carry the custom form beside the generic one; where a step has none (its custom
    printer raised), its diff sets generic against generic, never one form against the other."""
    report = hand_report()
    custom = ["builtin.module {\n  %0 = ein.load %x : f32\n}\n", "builtin.module {\n  %0 = affine.load %x[] : f32\n}\n"]
    for step, text in zip(report.steps, custom):
        step.ir_custom = text
    page = render_page(report)
    one = page[page.index('id="step-1"'):]
    one = one[: one.index("</details>")]
    assert "affine.load %x[]" in one and "&quot;affine.load&quot;" not in one  # custom beside custom
    two = page[page.index('id="step-2"'):]
    two = two[: two.index("</details>")]
    assert "&quot;affine.load&quot;" in two and "affine.load %x[]" not in two  # generic beside generic
    assert report.steps[1].ir_shown == custom[1] and report.steps[2].ir_shown == report.steps[2].ir_after
