"""A gallery of the tutorials: one card per notebook, with its first figure as the thumbnail.

``.. tutorial-gallery::`` followed by a list of notebook document names (one per line)
renders a grid of cards. The thumbnails are the first image that the executed notebook
produced in this build (myst-nb writes every figure as an image node), so nothing is
committed and a tutorial whose plot changes gets a new thumbnail. A notebook without a
figure gets a card with its title only.
"""

import copy

from docutils import nodes
from docutils.parsers.rst import Directive


class gallery(nodes.General, nodes.Element):
    """Placeholder for the gallery, filled in once every notebook has been read."""


class TutorialGallery(Directive):
    has_content = True

    def run(self):
        env = self.state.document.settings.env
        node = gallery()
        node["entries"] = [line.strip() for line in self.content if line.strip()]
        for entry in node["entries"]:
            env.note_dependency(env.doc2path(entry))
        return [node]


def _first_image(doctree):
    for img in doctree.findall(nodes.image):
        uri = img.get("uri", "")
        if uri.endswith((".png", ".svg", ".jpg", ".jpeg")):
            return img
    return None


def _fill(app, doctree, fromdocname):
    env = app.builder.env
    for node in list(doctree.findall(gallery)):
        grid = nodes.container(classes=["sl-gallery"])
        for docname in node["entries"]:
            if docname not in env.all_docs:
                raise ValueError(f"tutorial-gallery: no document {docname!r}")
            title = env.titles[docname].astext()
            card = nodes.container(classes=["sl-card"])
            ref = nodes.reference("", "", internal=True, classes=["sl-card-link"],
                                  refuri=app.builder.get_relative_uri(fromdocname, docname))
            img = _first_image(env.get_doctree(docname))
            if img is not None:
                thumb = copy.deepcopy(img)
                thumb["classes"] = ["sl-thumb"]
                thumb["alt"] = title
                for key in ("width", "height", "scale", "align"):
                    thumb.attributes.pop(key, None)
                ref += thumb
            else:
                ref += nodes.inline("", "no figure", classes=["sl-nothumb"])
            ref += nodes.inline("", title, classes=["sl-card-title"])
            para = nodes.paragraph()
            para += ref
            card += para
            grid += card
        node.replace_self(grid)


def setup(app):
    app.add_node(gallery)
    app.add_directive("tutorial-gallery", TutorialGallery)
    app.connect("doctree-resolved", _fill)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
