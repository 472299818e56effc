"""The tuner's side of the tuning records: each measured candidate added to the database the
compiler reads (einc.compiler.records holds the store, its schema and its queries).

    db = RecordDB(default_db_path())           # $EINC_TUNING_DB, else ~/.cache/einc/tuning.db
    db.add(task, record_context(get_target(task.target)), measure_result, tuner="bayes")
    db.best(task.key, "c", context)            # the tuner's latest decision, or None
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from einc.compiler.records import RecordContext, RecordStore, Row, program_summary

if TYPE_CHECKING:
    from einc.tune.types import MeasureResult, TuneTask


class RecordDB(RecordStore):
    """A tuning database the tuner writes: the store, plus `add` / `add_many` of measured
    candidates (one short transaction each)."""

    def add(self, task: TuneTask, context: RecordContext, result: MeasureResult, tuner: str = "") -> int:
        """Record one candidate measured under `context` (committed before it returns); its id."""
        return self.add_many(task, context, [result], tuner)[0]

    def add_many(self, task: TuneTask, context: RecordContext, results: Iterable[MeasureResult],
                 tuner: str = "") -> list[int]:  # fmt: skip
        """Record several candidates of one task, measured under `context`, in one
        transaction; their ids."""
        rows = [self._row(task, context, r, tuner) for r in results]
        self.require_writable()
        with self._guard("write"), self._transaction():
            self._insert_program(task.key, task.normalized, program_summary(task.source))
            return [self._insert(row)[0] for row in rows]

    def _row(self, task: TuneTask, context: RecordContext, result: MeasureResult, tuner: str) -> Row:
        extra = dict(result.extra)
        if result.run_s:
            extra.setdefault("run_s", result.run_s)
        times = [float(t) for t in result.times]  # kept for every status; only OK ones rank
        return {
            "task_key": task.key, "target": task.target, "device": context.device, "isa": context.isa,
            "driver": context.driver, "compiler": context.compiler, "flags": context.flags, "space": context.space,
            "sketch": result.candidate.point.sketch, "knobs": result.candidate.point.values(),
            "schedule": result.candidate.schedule, "status": result.status.value,
            "reason": result.reason, "times": times, "build_s": float(result.build_s),
            "created": time.time(), "tuner": tuner, "extra": json.loads(json.dumps(extra, default=str)),
        }  # fmt: skip
