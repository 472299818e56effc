"""What a tuning record lookup costs in a large database: `RecordStore.best` (the query a
compile makes), `find_record` (what `einc compile` and `einc.compile` call: opening the
database, this machine's record context, the lookup) and `RecordStore.others` (the records
that no longer apply, for the note), with N records (default 100,000) in a fresh database.

    .venv/bin/python benchmarks/records_lookup.py [--records 100000] [--repeat 15]

Three layouts of the N records: `spread` (N/100 programs of 100 records each: 99 trials, half
of them under another compiler, and a decision, as a tune leaves them), `one program, decided`
(all N records of one program: trials, half under another compiler, and at the end one
decision) and `one program, trials only` (the same without the decision, as an interrupted
search leaves them: `best` looks for a final ranking, then ranks every record that is no trial
and finds none, the slowest case; find_record then also asks for the records that do not apply
and prints its note once, on stderr). The records are inserted with
`executemany` in one transaction. Times are medians of `--repeat` calls after a warm-up
(common.measure: each sample loops the call for 50 ms).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import measure  # noqa: E402

from einc.compiler.records import RecordContext, RecordStore, find_record, program_key, record_context  # noqa: E402
from einc.targets import get_target  # noqa: E402

COLUMNS = ("task_key, target, device, sketch, knobs, schedule, status, reason, times, median_s, build_s, created,"
           " tuner, extra, digest, isa, driver, compiler, flags, space, context")  # fmt: skip
TRIAL = json.dumps({"trial": True})
DECISION = json.dumps({"final": "final-1", "best": True, "kept_default": False, "decision": "faster"})


def fill(store: RecordStore, programs: list[str], per_program: int, here: RecordContext, other: RecordContext,
         decisions: bool) -> None:  # fmt: skip
    """`per_program` records of each program (normalised text) on C: trials, every other one
    made under `other`, and (with `decisions`) a decision last, under `here`."""
    fields = (here.isa, here.driver, here.compiler, here.flags, here.space)
    rows = []
    for p, program in enumerate(programs):
        key = program_key(program)
        store.conn.execute("INSERT OR IGNORE INTO programs VALUES (?, ?, ?)", (key, program, program[:40]))
        for i in range(per_program):
            last = decisions and i == per_program - 1
            context = here if last or i % 2 else other
            rows.append((key, "c", here.device, "tile", '{"k": 4}', "// schedule", "ok", "", "[0.001]",
                         1e-3 + i * 1e-9, 0.1, 1.0, "bench", DECISION if last else TRIAL, f"{p}-{i}", *fields,
                         context.key))  # fmt: skip
    with store._transaction():
        store.conn.executemany(f"INSERT INTO records ({COLUMNS}) VALUES ({', '.join('?' * 21)})", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    target = get_target("c")
    here = record_context(target)
    other = dataclasses.replace(here, compiler="gcc (Debian 11.3.0-1) 11.3.0")
    n = args.records
    print(f"{n} records; C target; this machine's context: {here.device}, {here.compiler}")
    print(f"{'layout':<26} {'insert s':>9} {'best ms':>8} {'find_record ms':>15} {'others ms':>10}")
    layouts = {
        "spread": ([f"output{p}[N] = input0[N] * {p}.0" for p in range(n // 100)], 100, True),
        "one program, decided": (["output0[N, M] +=! input0[N, K] * input1[K, M]"], n, True),
        "one program, trials only": (["output0[N, M] +=! input0[N, K] * input1[K, M]"], n, False),
    }
    for name, (programs, per_program, decisions) in layouts.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "records.db"
            with RecordStore(path) as store:
                start = time.perf_counter()
                fill(store, programs, per_program, here, other, decisions)
                inserted = time.perf_counter() - start
                program = programs[len(programs) // 2]
                key = program_key(program)
                found = store.best(key, "c", here)
                assert (found is not None and found.is_decision) if decisions else found is None
                best = measure(lambda: store.best(key, "c", here), repeat=args.repeat)
                others = measure(lambda: store.others(key, "c", here), repeat=args.repeat)
            assert (find_record(program, target, path) is not None) == decisions
            lookup = measure(lambda: find_record(program, target, path), repeat=args.repeat)
            print(f"{name:<26} {inserted:>9.2f} {best.median_s * 1e3:>8.3f} {lookup.median_s * 1e3:>15.3f}"
                  f" {others.median_s * 1e3:>10.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
