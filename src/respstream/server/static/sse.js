// Incremental Server-Sent Events parser (WHATWG "event stream interpretation").
// Feed it decoded text in arbitrary chunks; it returns complete messages.
// Handles CR, LF and CRLF line ends (also a CRLF split across two chunks), one leading BOM,
// comment lines, "field:value" with one optional space, multi-line data joined by "\n",
// ids containing NUL (ignored) and no dispatch for a block without data.
// Why our own: EventSource cannot POST, and the fetch body is a raw byte stream.

const BOM = "\uFEFF";

export class SSEParser {
  constructor() {
    this._buf = "";
    this._started = false;
    this._skipLF = false; // last chunk ended in CR: a leading LF in the next chunk belongs to it
    this._data = [];
    this._event = "";
    this._lastId = "";
    this._hasData = false;
  }

  /** Feed a chunk of text; returns an array of {event, data, id} messages completed by it. */
  feed(text) {
    const out = [];
    if (text.length === 0) return out;
    if (!this._started) {
      this._started = true;
      if (text.startsWith(BOM)) text = text.slice(1);
    }
    if (this._skipLF && text.startsWith("\n")) text = text.slice(1);
    this._skipLF = false;
    this._buf += text;
    let start = 0;
    const buf = this._buf;
    for (;;) {
      const cr = buf.indexOf("\r", start);
      const lf = buf.indexOf("\n", start);
      let end;
      if (cr === -1 && lf === -1) break;
      if (cr === -1 || (lf !== -1 && lf < cr)) end = lf;
      else end = cr;
      const line = buf.slice(start, end);
      if (buf[end] === "\r") {
        if (end + 1 < buf.length) {
          start = buf[end + 1] === "\n" ? end + 2 : end + 1;
        } else {
          start = end + 1;
          this._skipLF = true;
        }
      } else {
        start = end + 1;
      }
      this._line(line, out);
    }
    this._buf = buf.slice(start);
    return out;
  }

  /** End of stream: an unterminated block is discarded (per the spec). */
  end() {
    this._buf = "";
    this._data = [];
    this._hasData = false;
    this._event = "";
    return [];
  }

  _line(line, out) {
    if (line === "") {
      if (this._hasData) {
        out.push({ event: this._event || "message", data: this._data.join("\n"), id: this._lastId });
      }
      this._data = [];
      this._hasData = false;
      this._event = "";
      return;
    }
    if (line.startsWith(":")) return; // comment, e.g. ": keep-alive"
    const colon = line.indexOf(":");
    let field = line;
    let value = "";
    if (colon !== -1) {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
    }
    switch (field) {
      case "data":
        this._data.push(value);
        this._hasData = true;
        break;
      case "event":
        this._event = value;
        break;
      case "id":
        if (!value.includes("\0")) this._lastId = value;
        break;
      default:
        break; // "retry" and unknown fields do not matter for a fetch reader
    }
  }
}
