"""Models: the built-in tiny model (``tiny``), loading policies and critics (``policy``) and
chat-template rendering (``chat``)."""
