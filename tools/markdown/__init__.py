"""Markdown to safe HTML, for answers (conversations) and markdown artifacts (tools).

- :mod:`tools.markdown.render`: markdown-it-py and nh3, the one renderer (``render_markdown``);
- :mod:`tools.markdown.images`: remote images become links;
- :mod:`tools.markdown.highlight`: Pygments with CSS classes, for artifact documents;
- :mod:`tools.markdown.views`: the frame in which the chat page draws mermaid diagrams.
"""
