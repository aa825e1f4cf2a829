"""The results viewer: a local web page over the store's whole history, and an HTML export."""

from eval_pipeline.viewer._data import run_id
from eval_pipeline.viewer._export import NoResults, render_html_export
from eval_pipeline.viewer._reader import StoreReader
from eval_pipeline.viewer._server import ViewerServer, make_server, serve

__all__ = [
    "NoResults",
    "StoreReader",
    "ViewerServer",
    "make_server",
    "render_html_export",
    "run_id",
    "serve",
]
