// Incremental markdown for a growing answer. A blank line outside a code fence always ends a block in
// renderMarkdown, so everything before the last such line renders the same whatever comes after: it is rendered
// once and kept ("committed"); only the open tail is re-rendered each frame. Per frame the work is the new text
// plus the tail, not the whole answer (a 20,000-delta answer would otherwise be re-rendered from the start).
import { highlightBlocks } from "./highlight.js";
import { renderMarkdown } from "./markdown.js";
import { addCodeCopyButtons } from "./thread-view.js";

const FENCE = /^\s*(`{3,}|~{3,})(.*)$/;

function fragment(html, decorate) {
  const template = document.createElement("template");
  template.innerHTML = html;
  decorate(template.content);
  return template.content;
}

/** Index just past the last blank line of `text` (from `from`) that lies outside a fence; -1 when none. */
function lastBoundary(text, from) {
  let boundary = -1;
  let fence = null;
  let start = from;
  while (start <= text.length) {
    let end = text.indexOf("\n", start);
    if (end === -1) break; // the last line is still being written: never a boundary
    const line = text.slice(start, end);
    const m = FENCE.exec(line);
    const t = line.trim();
    if (fence !== null) {
      // Closed as renderMarkdown closes it: only the fence character, at least as many as opened it.
      if (t.length >= fence.length && t === fence[0].repeat(t.length)) fence = null;
    } else if (m && !(m[1][0] === "`" && m[2].includes("`"))) {
      fence = m[1];
    } else if (fence === null && line.trim() === "" && start > from) {
      boundary = end + 1;
    }
    start = end + 1;
  }
  return boundary;
}

export class LiveMarkdown {
  /** @param {HTMLElement} box  @param {(html: string) => string} post  e.g. citation links */
  constructor(box, post = (html) => html) {
    this.box = box;
    this.post = post;
    this.reset();
  }

  reset() {
    this.committed = ""; // source already rendered into committed nodes
    this.tail = [];
    this.box.replaceChildren();
  }

  _decorate(root) {
    highlightBlocks(root);
    addCodeCopyButtons(root);
  }

  update(text) {
    if (!text.startsWith(this.committed)) this.reset(); // not an append (a rewrite, the other view): start over
    const cut = lastBoundary(text, this.committed.length);
    if (cut > this.committed.length) {
      const segment = text.slice(this.committed.length, cut);
      for (const node of this.tail) node.remove();
      this.tail = [];
      this.box.append(fragment(this.post(renderMarkdown(segment)), (r) => this._decorate(r)));
      this.committed = text.slice(0, cut);
    }
    for (const node of this.tail) node.remove();
    const rest = fragment(this.post(renderMarkdown(text.slice(this.committed.length))), (r) => this._decorate(r));
    this.tail = [...rest.childNodes];
    this.box.append(rest);
  }
}
