"""The HTTP transport every HTTP upstream adapter shares: the lean HTTP/1.1 client (stream.py over connection.py),
a connection handed back to its pool after the stream's end (connection_return.py) and HTTP failures mapped to
``UpstreamError`` codes (failures.py)."""
