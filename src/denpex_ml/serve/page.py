"""The HTML of the served page (Jinja2, autoescape on; styles and script inline under a CSP nonce)."""

from __future__ import annotations

from importlib import resources

from markupsafe import Markup

from denpex_ml.report.html import environment, template_text

__all__ = ["render_page"]


def _static(name: str) -> str:
    return resources.files("denpex_ml.serve").joinpath("templates", name).read_text(encoding="utf-8")


def render_page(*, nonce: str, max_upload_bytes: int) -> str:
    """The page: a paste box, a file / archive picker with a drop zone, and the result area."""
    from denpex_ml import __version__

    template = environment("denpex_ml.serve").get_template("page.html.j2")
    return template.render(
        nonce=nonce,
        version=__version__,
        max_upload_mb=f"{max_upload_bytes / 1024**2:.0f}"
        if max_upload_bytes >= 1024**2
        else f"{max_upload_bytes / 1024**2:.3f}",
        css=Markup(template_text("base.css") + _static("page.css")),
        js=Markup(_static("page.js")),
    )
