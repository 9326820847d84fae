"""fabricsim's web app (``fabricsim serve``; the ``web`` extra): an API and a page.

The API (:mod:`fabricsim.web.app`, FastAPI) describes clusters and runs bench, train,
scale, plan, simulate and packet jobs (:mod:`fabricsim.web.jobs`) in worker processes
within budgets (:mod:`fabricsim.web.limits`, :mod:`fabricsim.web.runner`), keeps jobs and
results in a DuckDB file (:mod:`fabricsim.web.store`) and streams progress as server-sent
events. The page, served by the same app with no outside assets, edits designs as
scenario YAML, runs them and draws the answers (:mod:`fabricsim.web.figures`). See
docs/web.md.

Example
-------
>>> from fabricsim.web.jobs import run_job
>>> out = run_job("describe", ["cluster: {system: dgx-h100, nodes: 2}"])
>>> out["designs"][0]["cluster"]["summary"]["gpus"]
16
"""
