"""The auto-tuner: search the schedule space of a program, measure candidates safely, and keep
the best in a database that later compiles reuse.

    task = TuneTask.from_file("matmul.ein", target="c")
    space = SearchSpace.from_task(task)          # sketches: transform scripts with knobs (space.py)
    policy = BayesianSearch(space, seed=0)       # or RandomSearch (search.py, model.py)
    builder, runner = LocalBuilder(2), LocalRunner()   # measure.py: process pool, isolated runs
    # or DaskRunner("tcp://HOST:PORT") as both: candidates built and measured on Dask workers (cluster.py)
    db = RecordDB(default_db_path())             # records.py: SQLite (WAL)
    tune(task, space, policy, builder, runner, db, trials=200)   # tuner.py: the loop

The shared vocabulary (tasks, points, build and measure results) is in `einc.tune.types`.
"""
