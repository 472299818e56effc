"""Importing this module warms the compiler up (`einc.tools.serve.jobs.warm_up`): the codegen
service's forkserver imports it before forking the worker processes, which so start with
every pass imported and the compiler's caches filled (`einc.tools.serve.app`)."""

from einc.tools.serve.jobs import warm_up

warm_up()
