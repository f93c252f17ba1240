// A small, safe markdown renderer for model output.
// Safety rule: the input is HTML-escaped FIRST; the rules below only ever wrap escaped text in a fixed
// set of tags we write ourselves. Link targets are limited to http(s)/mailto and are escaped too, so
// no model output can create an element or attribute we did not intend (no <img onerror>, no javascript:).

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Escape text for use in HTML element content and quoted attribute values. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const SAFE_URL = /^(https?:\/\/|mailto:)[^\s]*$/i;

// Inline rules run on already-escaped text. Code spans are cut out first so their content stays literal.
function inline(escaped) {
  const codes = [];
  // NUL is our placeholder marker: drop any the model sent so it cannot address a code span.
  let s = escaped.replace(/\u0000/g, "").replace(/`([^`\n]+)`/g, (_, code) => {
    codes.push(code);
    return `\u0000${codes.length - 1}\u0000`;
  });
  // Label and target exclude the brackets that could start another link, so every attempt stops at the next
  // one: the scan stays linear even on "[[[[…" or "[a](x[a](x…" (no backtracking over the rest of the line).
  s = s.replace(/\[([^[\]\n]+)\]\(([^()[\]\s]+)\)/g, (whole, label, url) => {
    // url is escaped text; undo only &amp; to test the scheme, then keep the escaped form in the attribute.
    const raw = url.replace(/&amp;/g, "&");
    if (!SAFE_URL.test(raw)) return whole;
    return `<a href="${url}" target="_blank" rel="noopener noreferrer nofollow">${label}</a>`;
  });
  s = s.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
  s = s.replace(/(^|[^\w])__([^_\n]+)__(?!\w)/g, "$1<strong>$2</strong>");
  s = s.replace(/(^|[^*\w])\*([^*\n]+)\*(?!\w)/g, "$1<em>$2</em>");
  s = s.replace(/(^|[^_\w])_([^_\n]+)_(?!\w)/g, "$1<em>$2</em>");
  s = s.replace(/~~([^~\n]+)~~/g, "<del>$1</del>");
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${codes[Number(i)]}</code>`);
}

/**
 * Render markdown to an HTML string that is safe to assign to innerHTML.
 * Supports: fenced code (```), ATX headings, bullet and numbered lists, blockquotes, horizontal rules,
 * paragraphs with line breaks, and inline code/bold/italic/strike/links. An unclosed fence (mid-stream)
 * renders as an open code block, so partial output looks stable while it streams.
 */
export function renderMarkdown(source) {
  const lines = escapeHtml(source).replace(/\r\n?/g, "\n").split("\n");
  const html = [];
  let i = 0;
  // Every branch below consumes at least one line, so the loop ends after at most lines.length steps; each
  // per-line regex is anchored and free of nested quantifiers, so the whole render is linear in the input.
  while (i < lines.length) {
    const line = lines[i];
    const fence = FENCE_OPEN.exec(line);
    if (fence && !(fence[1][0] === "`" && fence[2].includes("`"))) {
      const marker = fence[1];
      const body = [];
      i += 1;
      while (i < lines.length && !isFenceClose(lines[i], marker)) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // skip the closing fence (or run past the end while streaming)
      const lang = fenceLanguage(fence[2]);
      const attr = lang ? ` data-lang="${lang}"` : "";
      html.push(`<pre${attr}><code>${body.join("\n")}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      const level = Math.min(heading[1].length + 1, 6); // h1 is the page title; answer headings start at h2
      html.push(`<h${level}>${inline(heading[2])}</h${level}>`);
      i += 1;
      continue;
    }
    if (isRule(line)) {
      html.push("<hr>");
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && QUOTE.test(lines[i])) {
        quoted.push(lines[i].replace(QUOTE, ""));
        i += 1;
      }
      html.push(`<blockquote>${quoted.map(inline).join("<br>")}</blockquote>`);
      continue;
    }
    if (BULLET.test(line) || NUMBERED.test(line)) {
      const ordered = NUMBERED.test(line);
      const marker = ordered ? NUMBERED : BULLET;
      const items = [];
      while (i < lines.length && marker.test(lines[i])) {
        items.push(`<li>${inline(lines[i].replace(marker, ""))}</li>`);
        i += 1;
      }
      const tag = ordered ? "ol" : "ul";
      html.push(`<${tag}>${items.join("")}</${tag}>`);
      continue;
    }
    if (line.trim() === "") {
      i += 1;
      continue;
    }
    // A paragraph takes this line unconditionally (it matched no block rule above), then runs on until a line
    // that starts another block. Taking the first line unconditionally is what guarantees progress: a line that
    // merely looks like a block start (a fence with an odd info string) can no longer stall the loop.
    const para = [inline(line)];
    i += 1;
    while (i < lines.length && lines[i].trim() !== "" && !startsBlock(lines[i])) {
      para.push(inline(lines[i]));
      i += 1;
    }
    html.push(`<p>${para.join("<br>")}</p>`);
  }
  return html.join("\n");
}

// A fence opens with three or more backticks or tildes and any info string (```python title="x.py"```); the
// language is the info string's first word. A backtick fence's info string may not contain a backtick.
const FENCE_OPEN = /^\s*(`{3,}|~{3,})(.*)$/;
const BULLET = /^\s*[-*+]\s+/;
const NUMBERED = /^\s*\d{1,9}[.)]\s+/;
const QUOTE = /^\s*&gt;\s?/;

function fenceLanguage(info) {
  const word = info.trim().split(/\s/, 1)[0] || "";
  const m = /^[\w+#.-]{1,32}/.exec(word);
  return m ? m[0] : "";
}

function isFenceClose(line, marker) {
  const t = line.trim();
  return t.length >= marker.length && t[0] === marker[0] && t === marker[0].repeat(t.length);
}

function isRule(line) {
  const t = line.replace(/\s/g, "");
  return t.length >= 3 && /^[-*_]$/.test(t[0]) && t === t[0].repeat(t.length);
}

function startsBlock(line) {
  const f = FENCE_OPEN.exec(line);
  return (f !== null && !(f[1][0] === "`" && f[2].includes("`"))) || /^#{1,6}\s/.test(line) || BULLET.test(line)
    || NUMBERED.test(line) || QUOTE.test(line);
}
