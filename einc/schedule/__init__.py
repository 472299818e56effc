"""Schedules: transform-dialect scripts over the loops, and everything that decides or checks
them. `script.py` parses a script (`Schedule`, `Knob`) and applies it through
`interpreter.py` (einc's `transform.einc.*` ops and `transform.apply_registered_pass`);
`builder.py` builds one op by op on a scratch payload; `policies/` holds the default
schedules; `apply_pass.py` is the `einc-apply-schedule` pass."""
