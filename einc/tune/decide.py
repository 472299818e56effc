"""When a tuned kernel is the best: never unless it beats the default schedule beyond the noise
and the load of its measurements. The rule is pure (timings in, a verdict out), so it is tested
on made-up timings; `einc.tune.tuner` measures the rounds it judges.

The final rounds measure the default schedule and each finalist once per round, one right after
the other in a rotating order, so that load which comes and goes slows both alike. A round
gives a pair: the default's time d and the finalist's time c (medians of their repeats).

- A round is a win when even the least speed-up it allows beats the margin:

      d * (1 - load_d) / (1 + load_d) / c  >  1 + margin

  Load never makes the finalist faster (its time c on a quiet machine is at most c), but it may
  have slowed the default: `load_d` is the fraction of the default's wall time its threads
  waited for a core (run-queue wait, `einc.tune.timing`) while other processes held it: at
  most the CPU time other processes took meanwhile (`foreign_wait`), so that a device
  runtime's own threads (PoCL's pool, busy with the kernel) waiting for each other on a quiet
  machine are not counted as load. The default could not have finished
  sooner than 1 - load_d of its time for waiting alone; what it ran may have been slower too
  (caches refilled after each preemption, threads moved between cores), for which as much again
  is allowed: the divisor 1 + load_d. (Measured with one core busy: the default matmul, 1.42 ms
  at load 0.86, ran its non-waiting part 1.24x slower than its least quiet time; the allowance
  is 1.86x. Its CPU time, 1.6x its quiet work, is no usable bound.) So a round on a loaded
  machine can still be won, but only by a finalist faster than the load could explain. With
  one core busy elsewhere a two-thread default waits about 100% of the time and nothing wins
  against it: a one-thread kernel beats a parallel one on a half-busy machine and loses on a
  quiet one, which is how an earlier tuner recorded a best 5x slower than the default.
  `margin` is 2%.
- The noise is judged over the rounds, not in each: the finalist's gain, the median of the
  rounds' least speed-ups (the left side above), must beat `1 + margin + noise`, the noise
  being the median over the rounds of the larger of the two measurements' repeat spreads
  ((p75 - p25) / median) — or, where the rounds are enough to show it themselves (8 or more:
  the tuner's second look), the lower end of the gain's distribution-free interval
  (`median_interval` of the least speed-ups) must beat `1 + margin`. (A repeat's spread is
  the noise of one repeat, not of a median over many rounds: on PoCL a measurement's repeats
  spread ~16% while a finalist's 18 rounds put it at 1.19-1.30x the default; judged by the
  spread alone, a finalist 1.18x the default on a quiet machine was never crowned.) (An earlier rule asked every round to beat its own spread: on
  PoCL, whose thread pool makes a measurement's repeats spread 10-40% now and then, a
  finalist 1.4x the default in every round lost the rounds with a jittery repeat, and one
  lost round of six kept the default.)
- A finalist is crowned only when its wins are significant and its gain beyond the noise: a
  one-sided sign test, the chance of at least that many wins in that many rounds were the two
  kernels equally fast, at most `alpha / finalists` (5%, Bonferroni over the finalists). With
  3 finalists that is 6 wins in 6 rounds; where the closest finalist leads (won most rounds,
  or the machine was loaded) but is not crowned, the tuner measures it against the default
  for `SECOND_ROUNDS` times as many rounds again, once, and judges it on all of them at half
  that level (`SECOND_LOOK`; 22 wins of 30 rounds with 3 finalists), so that both looks
  together crown an equally fast finalist with a chance of at most 1.5 * alpha, however long
  the second look. (It was twice as many, 15 wins of 18: on PoCL, whose rounds' speed-ups
  scatter ~10% around the truth, a finalist 1.13x the default lost 4 or more of 18 rounds
  about half the time and was not crowned (MatMul 512^3, benchmarks/device_kernels.py: a
  finalist 1.13-1.18x the best hand schedule, the default kept); simulated with rounds
  scattering 8% (log-normal), a 1.13x finalist is crowned 58% of the time on 18 rounds, 86%
  on 30, an equally fast one 0.1% on both.)
- Of the crowned finalists the one with the greatest median speed-up is the best; with none
  the default schedule is kept, and the decision says why.

The speed-up reported is the median of the rounds' ratios d / c, with a distribution-free
confidence interval of that median (order statistics of the ratios).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from einc.tune.timing import foreign_wait

MARGIN = 0.02
"""The least speed-up (beyond each round's noise and load) that counts as a win: 2%."""
ALPHA = 0.05
"""The chance, were the finalist no faster, that the rule crowns it anyway (over all finalists)."""
SECOND_LOOK = 0.5
"""The share of `alpha` at which a finalist measured again (the tuner's second look) is judged."""
SECOND_ROUNDS = 4
"""The second look's rounds, in multiples of the first look's: the sign test's power grows with
the rounds while its level (`SECOND_LOOK`) stays."""
CONFIDENCE = 0.90
"""Of the speed-up's reported interval."""
LOADED = 0.05
"""A measurement whose threads waited for a core more than this fraction of its wall time was
taken on a loaded machine (`NoiseLimits.max_wait`)."""
@dataclass(frozen=True)
class Sample:
    """One measurement of a round: the median seconds per run (inf when it failed), the spread of
    its repeats, and its load: the fraction of its wall time its threads waited for a core (from
    the run-queue wait; where that is unknown, the share of the wall time the process did not
    run), 0 on a quiet machine."""

    seconds: float
    spread: float = 0.0
    load: float = 0.0

    @property
    def ok(self) -> bool:
        return math.isfinite(self.seconds) and self.seconds > 0

    @property
    def quiet_share(self) -> float:
        """The least share of `seconds` the kernel could take on a quiet machine (see the module):
        (1 - load) / (1 + load)."""
        return (1.0 - self.load) / (1.0 + self.load)

    @classmethod
    def of(cls, seconds: float, extra: Mapping[str, object]) -> Sample:
        """From a measurement's median and its runner's `extra` (`spread`, `wall_s`, `wait_s`,
        `cpu_s`, as `einc.tune.measure.LocalRunner` records them)."""
        return cls(seconds, _number(extra.get("spread")), load_of(extra))


def load_of(extra: Mapping[str, object]) -> float:
    """A measurement's load (see `Sample`), from its runner's `extra`; 0 where nothing says.
    Only the wait that other processes can account for counts (`foreign_wait`: at most the CPU
    time `others_s` they took meanwhile): the threads of a device runtime's own pool (PoCL's)
    waiting for each other on a quiet machine are not load."""
    wall = _number(extra.get("wall_s"))
    if wall <= 0:
        return 0.0
    wait = extra.get("wait_s")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and math.isfinite(wait):
        others = extra.get("others_s")
        known = isinstance(others, int | float) and not isinstance(others, bool) and math.isfinite(others)
        return min(1.0, max(0.0, foreign_wait(wait, _number(others) if known else None) / wall))
    return min(1.0, max(0.0, 1.0 - _number(extra.get("cpu_s")) / wall)) if "cpu_s" in extra else 0.0


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) else 0.0


@dataclass(frozen=True)
class Pair:
    """One round: the default's and the finalist's measurement."""

    default: Sample
    challenger: Sample

    @property
    def ok(self) -> bool:
        return self.default.ok and self.challenger.ok

    @property
    def ratio(self) -> float:
        """The round's speed-up d / c (nan when either measurement failed)."""
        return self.default.seconds / self.challenger.seconds if self.ok else math.nan

    @property
    def bound(self) -> float:
        """The least speed-up the round allows on a quiet machine: d * quiet_share_d / c."""
        return self.ratio * self.default.quiet_share if self.ok else math.nan

    @property
    def spread(self) -> float:
        """The round's noise: the larger of the two measurements' repeat spreads."""
        return max(self.default.spread, self.challenger.spread)

    def won(self, margin: float = MARGIN) -> bool:
        """Whether the least speed-up the round allows beats 1 + margin."""
        return self.ok and self.bound > 1.0 + margin

    @property
    def loaded(self) -> bool:
        return max(self.default.load, self.challenger.load) > LOADED


def sign_p(wins: int, rounds: int) -> float:
    """P(at least `wins` heads in `rounds` fair coin tosses): the one-sided sign test."""
    if rounds <= 0:
        return 1.0
    return sum(math.comb(rounds, k) for k in range(max(0, wins), rounds + 1)) / 2.0**rounds


def rounds_needed(finalists: int, alpha: float = ALPHA) -> int:
    """The fewest rounds in which all wins can be significant for one of `finalists`."""
    return max(1, math.ceil(math.log2(max(1, finalists) / alpha)))


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of `values`: the k-th least and
    k-th greatest, k the largest with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2 (the
    whole range where n is too small for any better; nan for no values)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan, math.nan
    k = median_rank(n, confidence)
    return ordered[k - 1], ordered[n - k]


def median_rank(n: int, confidence: float = CONFIDENCE) -> int:
    """The k of `median_interval` for `n` values (1: their whole range; 2 or more from 8 values
    at 90%)."""
    tail = (1.0 - confidence) / 2
    k = 1
    while k < (n + 1) // 2 and sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n <= tail:
        k += 1
    return k


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


@dataclass(frozen=True)
class Verdict:
    """One finalist judged against the default over its rounds."""

    pairs: tuple[Pair, ...]
    alpha: float
    margin: float = MARGIN

    @property
    def rounds(self) -> int:
        return len(self.pairs)

    @property
    def wins(self) -> int:
        return sum(p.won(self.margin) for p in self.pairs)

    @property
    def p_value(self) -> float:
        return sign_p(self.wins, self.rounds)

    @property
    def gain(self) -> float:
        """The median of the rounds' least speed-ups (`Pair.bound`; nan without a round measured
        on both sides)."""
        return _median([p.bound for p in self.pairs if p.ok])

    @property
    def noise(self) -> float:
        """The median of the rounds' spreads (0 without a round measured on both sides)."""
        spreads = [p.spread for p in self.pairs if p.ok]
        return _median(spreads) if spreads else 0.0

    @property
    def gain_low(self) -> float:
        """The lower end of the median interval (`median_interval`) of the rounds' least
        speed-ups, where the rounds are enough for one narrower than their whole range (nan
        where not: fewer than 8 rounds measured on both sides)."""
        bounds = [p.bound for p in self.pairs if p.ok]
        return median_interval(bounds)[0] if bounds and median_rank(len(bounds)) > 1 else math.nan

    @property
    def beyond_noise(self) -> bool:
        """Whether the gain beats 1 + margin + the noise, or, over rounds enough for it, the
        lower end of its interval (`gain_low`) beats 1 + margin."""
        if not math.isfinite(self.gain):
            return False
        return self.gain > 1.0 + self.margin + self.noise or (math.isfinite(self.gain_low) and self.gain_low > 1.0 + self.margin)

    @property
    def leads(self) -> bool:
        """Won most of its rounds (not necessarily significant)."""
        return 2 * self.wins > self.rounds

    @property
    def significant(self) -> bool:
        return self.rounds > 0 and self.p_value <= self.alpha and self.beyond_noise

    @property
    def ratios(self) -> list[float]:
        return [p.ratio for p in self.pairs if p.ok]

    @property
    def speedup(self) -> float:
        """The median of the rounds' d / c (nan without a round measured on both sides)."""
        return _median(self.ratios)

    @property
    def interval(self) -> tuple[float, float]:
        return median_interval(self.ratios)

    @property
    def loaded(self) -> int:
        """Rounds measured on a loaded machine."""
        return sum(p.loaded for p in self.pairs)

    @property
    def failed(self) -> int:
        """Rounds in which either measurement failed."""
        return sum(not p.ok for p in self.pairs)

    @property
    def max_load(self) -> float:
        return max((p.default.load for p in self.pairs), default=0.0)

    def describe(self) -> str:
        """`1.43x the default (90% interval 1.38-1.49x), faster in 6 of 6 rounds, gain 1.40x
        beyond the noise (5%)`."""
        if not self.ratios:
            return f"not measured in any of {self.rounds} rounds"
        low, high = self.interval
        text = (f"{self.speedup:.2f}x the default ({CONFIDENCE:.0%} interval {low:.2f}-{high:.2f}x), "
                f"faster in {self.wins} of {self.rounds} rounds, gain {self.gain:.2f}x "
                f"{'beyond' if self.beyond_noise else 'within'} the noise ({self.noise:.0%})")  # fmt: skip
        notes = []
        if self.loaded:
            notes.append(f"{self.loaded} loaded: the default's threads waited for a core up to {self.max_load:.0%} "
                         "of the time")  # fmt: skip
        if self.failed:
            notes.append(f"{self.failed} not measured")
        return text + (f" ({'; '.join(notes)})" if notes else "")

    def to_json(self) -> dict[str, object]:
        low, high = self.interval
        return {"speedup": _finite(self.speedup), "interval": [_finite(low), _finite(high)], "wins": self.wins,
                "rounds": self.rounds, "p": self.p_value, "alpha": self.alpha, "loaded": self.loaded,
                "gain": _finite(self.gain), "gain_low": _finite(self.gain_low), "noise": self.noise,
                "bounds": [_finite(p.bound) for p in self.pairs]}  # fmt: skip


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def judge(pairs: Sequence[Pair], finalists: int = 1, *, alpha: float = ALPHA, margin: float = MARGIN) -> Verdict:
    """One finalist's verdict over its rounds, one of `finalists` judged at once."""
    return Verdict(tuple(pairs), alpha / max(1, finalists), margin)


@dataclass(frozen=True)
class Decision:
    """What the final rounds decided: the index of the crowned finalist (None: the default
    schedule is kept), each finalist's verdict (by index), and why, in a sentence."""

    crowned: int | None
    verdicts: Mapping[int, Verdict] = field(default_factory=dict)
    reason: str = ""

    @property
    def kept_default(self) -> bool:
        return self.crowned is None


def decide(verdicts: Mapping[int, Verdict], names: Mapping[int, str]) -> Decision:
    """The finalist to crown among `verdicts` (the significant one with the greatest median
    speed-up), or the default kept, with the reason."""
    crowned = [i for i, v in verdicts.items() if v.significant]
    if crowned:
        best = max(crowned, key=lambda i: (verdicts[i].speedup, -i))
        return Decision(best, dict(verdicts), f"{names[best]} is {verdicts[best].describe()}")
    if not verdicts:
        return Decision(None, {}, "no finalist to compare with the default")
    closest = max(verdicts, key=lambda i: (_or(verdicts[i].speedup), -i))
    v = verdicts[closest]
    why = f"no finalist beat the default in enough rounds beyond the noise; the closest, {names[closest]}, is {v.describe()}"
    if v.loaded and v.loaded * 2 >= v.rounds:
        why += "; the machine was busy: tune on a quieter machine (or with fewer --threads) to decide"
    return Decision(None, dict(verdicts), why)


def _or(x: float, default: float = -math.inf) -> float:
    return x if math.isfinite(x) else default
