"""The results viewer: a local web page over the store's whole history, and an HTML export."""

from eval_pipeline.viewer._export import NoResults, render_html_export
from eval_pipeline.viewer._server import ViewerServer, make_server, serve

__all__ = ["NoResults", "ViewerServer", "make_server", "render_html_export", "serve"]
