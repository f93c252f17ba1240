// Captures: record the raw SSE messages of a run (for "Export .sse"), and read a dropped .sse file back into
// messages so it replays through the same sequencer, rules and views as a live stream.
import { SSEParser } from "./sse.js";

const MAX_MESSAGES = 500_000; // memory bound for one run's recording

export class Recorder {
  constructor() {
    this.messages = [];
    this.dropped = 0;
  }

  add(msg) {
    if (this.messages.length >= MAX_MESSAGES) {
      this.dropped += 1;
      return;
    }
    this.messages.push({ event: msg.event, id: msg.id, data: msg.data });
  }

  get size() {
    return this.messages.length;
  }

  /** The recording as an event stream, one block per message, as it came off the wire (after decoding). */
  toSSE() {
    const out = [": captured by the respstream playground\n\n"];
    for (const m of this.messages) {
      let block = "";
      if (m.id) block += `id: ${m.id}\n`;
      if (m.event && m.event !== "message") block += `event: ${m.event}\n`;
      else if (m.event === "message") block += "event: message\n";
      for (const line of String(m.data).split("\n")) block += `data: ${line}\n`;
      out.push(`${block}\n`);
    }
    return out.join("");
  }
}

/** Decode a capture file's text into SSE messages. */
export function readCapture(text) {
  const parser = new SSEParser();
  const messages = parser.feed(text);
  parser.end(); // an unterminated last block is discarded, as `respstream check` does
  return messages;
}

/** Offer `text` as a file download. */
export function download(name, text, type = "text/event-stream") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
