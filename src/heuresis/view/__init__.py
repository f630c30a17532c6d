"""A local, read-only web view of a run: every episode and game play, each edge traced to its calls.

``heuresis view [RESULTS]`` serves it on 127.0.0.1 (:func:`serve`), following a running workflow;
``heuresis view RESULTS_A RESULTS_B`` compares two runs; ``heuresis view --export DIR`` writes the
same pages as files (:func:`export_site`). See docs/viewer.md.

* :mod:`heuresis.view.run`: the run's tables, found by schema and read with :func:`heuresis.artifacts.io.read_table`,
  and its transcripts, read with :mod:`heuresis.artifacts.transcripts`;
* :mod:`heuresis.view.pages`: the pages (Jinja2 templates, JSON blobs and ``static/table.js`` for the index,
  ``static/page.js`` for the turn keys);
* :mod:`heuresis.view.live`: the run's plan and the header a served index follows;
* :mod:`heuresis.view.diff`: two runs' episodes paired, their deltas per condition;
* :mod:`heuresis.view.sites`: the site of one folder or two, and its export;
* :mod:`heuresis.view.server`: the loopback server.
"""

from heuresis.view.pages import Site
from heuresis.view.server import make_server, serve
from heuresis.view.sites import export_site, open_site

__all__ = ["Site", "export_site", "make_server", "open_site", "serve"]
