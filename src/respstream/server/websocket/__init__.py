"""WebSocket mode of ``/v1/responses``: a sans-IO session (``session.py``: lanes, queues, steering, turn state;
``frames.py`` and ``events.py``: what comes in and goes out) and the thin transport around it (``transport.py``,
``sender.py``, ``frame_writer.py``, ``limits.py``)."""
