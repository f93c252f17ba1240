"""What every HTTP upstream adapter shares: the base class of the HTTP families (upstream.py: ``HttpUpstream``, the
concurrency slot, retries, deadline and model list), the lean HTTP/1.1 client (stream.py over connection.py), a
connection handed back to its pool after the stream's end (connection_return.py) and HTTP failures mapped to
``UpstreamError`` codes (failures.py)."""
