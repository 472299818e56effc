"""Importing this module warms the compiler up (`einc.serve_jobs.warm_up`): the codegen
service's forkserver imports it before forking the worker processes, which so start with
every pass imported and the compiler's caches filled (`einc.serve`)."""

from einc.serve_jobs import warm_up

warm_up()
