"""Reports of the last build (SPEC section 6), made from .farmer/last-build.json and the
state without building: an HTML page (html.py), JUnit XML (junit.py), a markdown summary
(markdown.py) and GitHub Actions annotations (github.py), all from one model (model.py).
Nothing here is imported on a build's way, except github.py at the end of a build in Actions."""
