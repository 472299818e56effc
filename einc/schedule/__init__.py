"""Schedules: transform-dialect scripts over the loops, and everything that decides or checks
them. `script.py` parses a script (`Schedule`, `Knob`) and applies it through
`interpreter.py` (einc's `transform.einc.*` ops and `transform.apply_registered_pass`, with
the pass registry its caller hands in); `builder.py` builds one op by op on a scratch
payload; `default.py` and `policies/` give the default schedule by the target's schedule
family; `checks.py` refuses what a target cannot run, from its facts; `choice.py` says which
schedule a compilation applies (`ScheduleChoice`); `apply_pass.py` is the
`einc-apply-schedule` pass."""
