"""``unmask serve``: every decoder behind an OpenAI-compatible HTTP API.

The parts, each usable alone:

* :mod:`unmask.serve.options`: the server's settings (:class:`ServeOptions`), plain data.
* :mod:`unmask.serve.jobs`: a request's rows as a :class:`~unmask.serve.jobs.Job` (prompt ids,
  one seed per row, and the settings that decide which rows may share a decode call).
* :mod:`unmask.serve.decoding`: one decode call over several compatible jobs, with per-row
  seeds, block-by-block progress for streaming and rows that can be cancelled.
* :mod:`unmask.serve.batching`: the dynamic batcher (asyncio): requests that arrive within the
  wait window with compatible settings decode in one call.
* :mod:`unmask.serve.schemas`: the request bodies (validated) and OpenAI's response shapes.
* :mod:`unmask.serve.app`: the ASGI application (FastAPI), :func:`~unmask.serve.app.create_app`.
* :mod:`unmask.serve.ray_app`: the same application as a Ray Serve deployment.

Nothing here is imported by ``import unmask``; fastapi, uvicorn and ray are optional
(``pip install 'unmask[serve]'``).
"""
