"""Schedule fuzzing: random, mostly illegal transform scripts on small random programs.

Three kinds of script (all from one seed, on a program of tests/oracle/genprog.py):
- token-level mutations of a valid script (tests/oracle/genschedule.py): a token deleted,
  repeated, or replaced by another token of the dialect's vocabulary;
- op-level mutations: lines deleted, repeated, swapped, a handle replaced by another (or an
  undefined one), a size by any integer, a tag or a bind axis by another, a random op inserted;
- random op sequences: ops with random handles, sizes, tags, memories and knobs.

Every script either compiles and computes the oracle's numbers, or is refused with a located
EincError (ScheduleError, TargetError, SemanticError: tests/oracle/corpus.py REFUSALS). A crash,
an unlocated refusal, a ToolchainError or wrong numbers fail. Example counts scale with
EINC_HYPOTHESIS_PROFILE (CI: about a minute in all; scripts/explore.py runs `thorough`).
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from einc.compiler.registry import get_all_passes
from einc.compiler.driver import Compilation
from einc.errors import TargetError
from tests.oracle.budget import examples
from tests.oracle.corpus import REFUSED_BY_DESIGN, check_case, genprog_case
from tests.oracle.genprog import GenProgram, programs
from tests.oracle.genschedule import BIND_AXES, OPS, Draft, header, random_script
from tests.test_device_targets import require

FUZZ_EXAMPLES = {"c": 50, "opencl": 8, "hlsl": 2, "sycl": 2, "poplar": 2}

VOCABULARY = (
    "%root", "%h1", "%h2", "%h3", "%h9", "%k1", "=", ",", "by", "at", "in", "into", "to", "from", "[", "]",
    "stmt", "axis", "init", "ops", "max_threads", "halo", '"local"', '"shared"', '"global"', '"output0"', '"N"',
    '"M.o"', '"thread.x"', '"block.q"', "0", "1", "-1", "3", "64", "2147483648", "transform.yield",
    *(f"transform.einc.{op}" for op in OPS),
)  # fmt: skip

INT = re.compile(r"(?<![\w%.])-?\d+(?![\w.])")
HANDLE = re.compile(r"%[hk]\d+")


def _tokens(line: str) -> list[str]:
    return re.findall(r'"[^"]*"|%\w+|[\w.]+|-?\d+|\S', line)


def token_mutation(lines: list[str], rng: random.Random) -> list[str]:
    lines = list(lines) or ["transform.yield"]
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        toks = _tokens(lines[i]) or [""]
        j = rng.randrange(len(toks))
        how = rng.choice(["delete", "repeat", "replace", "replace"])
        if how == "delete":
            del toks[j]
        elif how == "repeat":
            toks.insert(j, toks[j])
        else:
            toks[j] = rng.choice(VOCABULARY)
        lines[i] = " ".join(toks)
    return lines


def random_line(rng: random.Random, handles: list[str], stmts: list[str], axes: list[str]) -> str:
    """One op with random operands (defined handles mostly, sometimes not)."""
    def h() -> str:
        return rng.choice(handles) if handles and rng.random() < 0.85 else f"%h{rng.randint(1, 40)}"

    def size() -> str:
        return rng.choice([str(rng.choice([-2, 0, 1, 2, 3, 4, 5, 8, 13, 64, 1000])), "%k1"])

    new = f"%h{rng.randint(41, 99)}"
    op = rng.choice(OPS)
    if op == "match":
        init = " init" if rng.random() < 0.2 else ""
        return f'{new} = transform.einc.match stmt "{rng.choice(stmts)}" axis "{rng.choice(axes)}"{init} in {rng.choice(["%root", h()])}'
    if op == "knob":
        values = sorted(rng.sample(range(-1, 33), rng.randint(1, 4)))
        return f'%k1 = transform.einc.knob "k{rng.randint(0, 2)}" = {rng.choice(values + [7])} from {values}'
    if op in ("tile", "peel", "rfactor"):
        return f"{new}, {new}b = transform.einc.{op} {h()} by {size()}"
    if op == "unroll":
        return f"{new} = transform.einc.unroll {h()} by {size()}"
    if op == "group_lanes":
        return f"{new}, {new}l = transform.einc.group_lanes {h()} by {size()}"
    if op == "split_phases":
        return f"{new} = transform.einc.split_phases {h()} by {size()}"
    if op == "distribute":
        n = rng.randint(1, 3)
        return f"{', '.join(f'{new}d{i}' for i in range(n))} = transform.einc.distribute {h()} into {rng.choice([n, n, 0, 65])}"
    if op == "coalesce":
        return f"{new} = transform.einc.coalesce {h()} by {rng.choice([2, 2, 3, 0, 9, size()])}"
    if op == "split_conditions":
        return f"{new} = transform.einc.split_conditions {h()}"
    if op == "unswitch":
        limit = f" {{max_versions = {rng.choice([0, 1, 2, 8, 65])}}}" if rng.random() < 0.4 else ""
        return f"{new} = transform.einc.unswitch {h()}{limit}"
    if op == "prefetch":
        return f'{new} = transform.einc.prefetch "{rng.choice(stmts + ["input0", "nothing"])}" at {h()} by {rng.choice([0, 1, 2, 65, 1000])}'
    if op == "reorder":
        n = rng.randint(1, 4)
        return f"{', '.join(f'{new}r{i}' for i in range(n))} = transform.einc.reorder {', '.join(h() for _ in range(n))}"
    if op == "rotate":
        n = rng.randint(1, 4)
        return f"{', '.join(f'{new}q{i}' for i in range(n))} = transform.einc.rotate {', '.join(h() for _ in range(n))} by {size()}"
    if op in ("parallelize", "vectorize", "vectorize_reduction", "double_buffer"):
        return f"transform.einc.{op} {h()}"
    if op == "bind":
        axis = rng.choice([*BIND_AXES, "block.w", "lane"])
        limit = f" max_threads {rng.choice([0, 1, 7, 64, 100000])}" if rng.random() < 0.4 else ""
        return f'transform.einc.bind {h()} to "{axis}"{limit}'
    if op == "fuse":
        return f"{new} = transform.einc.fuse {h()} into {h()}"
    if op == "reuse":
        return f"transform.einc.reuse {h()} in {h()}"
    if op in ("compute_at", "reverse_compute_at"):
        return f"transform.einc.{op} {h()} at {h()}"
    memory = rng.choice(["", ' in "local"', ' in "shared"', ' in "global"'])
    halo = " halo" if rng.random() < 0.3 else ""  # legal on a local read of a bounds-guarded input
    return f'{new} = transform.einc.{op} "{rng.choice(stmts + ["input0", "nothing"])}" at {h()}{memory}{halo}'


def op_mutation(lines: list[str], rng: random.Random, stmts: list[str], axes: list[str]) -> list[str]:
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        handles = sorted({m for ln in lines for m in HANDLE.findall(ln)})
        how = rng.choice(["delete", "repeat", "swap", "handle", "size", "tag", "insert", "insert"])
        i = rng.randrange(len(lines)) if lines else 0
        if how == "insert" or not lines:
            lines.insert(i, random_line(rng, handles, stmts, axes))
        elif how == "delete":
            del lines[i]
        elif how == "repeat":
            lines.insert(i, lines[i])
        elif how == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "handle" and HANDLE.search(lines[i]):
            found = HANDLE.findall(lines[i])
            lines[i] = lines[i].replace(rng.choice(found), rng.choice(handles + ["%h77", "%root"]), 1)
        elif how == "size" and INT.search(lines[i]):
            lines[i] = INT.sub(lambda m: str(rng.choice([-1, 0, 1, 2, 5, 9, 31, 4096])) if rng.random() < 0.5
                               else m.group(0), lines[i])  # fmt: skip
        elif how == "tag":
            lines[i] = re.sub(r'(stmt|axis|to) "[^"]*"', lambda m: f'{m.group(1)} "{rng.choice(stmts + axes + list(BIND_AXES))}"',
                              lines[i], count=1)  # fmt: skip
    return lines


def fuzz_script(comp: Compilation, mode: str, rng: random.Random) -> str:
    """A script of `mode` ("token", "op", "random") for `comp`'s program (run to "loops")."""
    from tests.oracle.genschedule import loops_of

    loops = loops_of(comp.results["loops"])
    stmts = sorted({lp.stmt for lp in loops}) or ["output0"]
    axes = sorted({lp.axis for lp in loops}) or ["N"]
    if mode == "random":
        lines: list[str] = []
        for _ in range(rng.randint(1, 8)):
            handles = sorted({m for ln in lines for m in HANDLE.findall(ln)})
            lines.append(random_line(rng, handles, stmts, axes))
        return header(lines)
    draft: Draft = random_script(comp, rng, rng.randint(1, 5))
    if mode == "token":
        text = header(draft.lines)
        return "\n".join(token_mutation(text.splitlines(), rng)) + "\n"
    return header(op_mutation(draft.lines, rng, stmts, axes))


def _split(line: str) -> tuple[str, str]:
    """(the results, the rest) of a script line."""
    if re.match(r"\s*%[\w, %]+=", line):
        lhs, _, rhs = line.partition("=")
        return lhs, rhs
    return "", line


def check_fuzz(prog: GenProgram, seed: int, mode: str, target: str) -> None:
    text, input_dict, extra = prog.compile_args()
    comp = Compilation(text, "<program>", input_dict, extra, target, "none")
    try:
        comp.run_until("loops")
    except TargetError as err:
        assert err.loc is not None and REFUSED_BY_DESIGN.search(err.message), err.render()
        return
    script = fuzz_script(comp, mode, random.Random(seed))
    case = genprog_case(prog, target, script, seed, f"schedule fuzz ({mode})")
    note(case.reproducer())
    refused = check_case(case)  # raises on anything but the right numbers or a located refusal
    if refused is not None:
        note(f"refused: {refused.render()}")


@pytest.mark.parametrize("target", [pytest.param(t, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=t)
                                    for t in FUZZ_EXAMPLES])  # fmt: skip
def test_fuzzed_schedules_compute_right_numbers_or_are_refused(target: str) -> None:
    if target != "c":
        require(target)

    @settings(max_examples=examples(FUZZ_EXAMPLES[target]), deadline=None, suppress_health_check=list(HealthCheck))
    @given(prog=programs(), seed=st.integers(0, 2**32 - 1), mode=st.sampled_from(["op", "token", "random"]))
    def run(prog: GenProgram, seed: int, mode: str) -> None:
        check_fuzz(prog, seed, mode, target)

    run()


def test_fuzzer_makes_each_kind_of_script() -> None:
    """The three kinds differ from the valid script they start from, and most are refused
    (the fuzzer explores illegal scripts, not only legal ones)."""
    from tests.programs import PROGRAMS

    case = next(p for p in PROGRAMS if p.name == "softmax")
    comp = Compilation(case.ir, "<p>", case.input_dict, case.extra_outputs, "c", "none")
    comp.run_until("loops")
    refused = 0
    for seed in range(30):
        for mode in ("token", "op", "random"):
            text = fuzz_script(comp, mode, random.Random(seed))
            assert "transform.named_sequence" in text or mode == "token"
            try:
                from einc.schedule.script import Schedule

                Schedule.parse(text, "<fuzz>").apply(comp.results["loops"], get_all_passes())
            except Exception as err:  # noqa: BLE001 - only located EincErrors may escape
                from einc.errors import EincError

                assert isinstance(err, EincError) and err.loc is not None, f"{type(err).__name__}: {err}\n{text}"
                refused += 1
    assert refused >= 30, f"only {refused} of 90 fuzzed scripts refused"
