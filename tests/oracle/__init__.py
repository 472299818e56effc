"""einc's NumPy oracle: hand-written references for `tests/programs.py` and a generator of
random Antares programs with their NumPy meaning. Nothing here imports einc's frontend or IR:
the meaning of a program is taken from docs/LANGUAGE.md and written out again in NumPy."""
