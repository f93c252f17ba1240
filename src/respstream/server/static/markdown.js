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
  let s = escaped.replace(/`([^`\n]+)`/g, (_, code) => {
    codes.push(code);
    return `\u0000${codes.length - 1}\u0000`;
  });
  s = s.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (whole, label, url) => {
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
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !new RegExp(`^\\s*${fence[1]}\\s*$`).test(lines[i])) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // skip the closing fence (or run past the end while streaming)
      const lang = fence[2] ? ` data-lang="${fence[2]}"` : "";
      html.push(`<pre${lang}><code>${body.join("\n")}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      const level = Math.min(heading[1].length + 1, 6); // h1 is the page title; answer headings start at h2
      html.push(`<h${level}>${inline(heading[2])}</h${level}>`);
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      html.push("<hr>");
      i += 1;
      continue;
    }
    if (/^\s*&gt;\s?/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s*&gt;\s?/.test(lines[i])) {
        quoted.push(lines[i].replace(/^\s*&gt;\s?/, ""));
        i += 1;
      }
      html.push(`<blockquote>${quoted.map(inline).join("<br>")}</blockquote>`);
      continue;
    }
    const bullet = /^\s*[-*+]\s+/;
    const numbered = /^\s*\d{1,9}[.)]\s+/;
    if (bullet.test(line) || numbered.test(line)) {
      const ordered = numbered.test(line);
      const marker = ordered ? numbered : bullet;
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
    const para = [];
    while (
      i < lines.length &&
      lines[i].trim() !== "" &&
      !/^\s*(```|~~~)/.test(lines[i]) &&
      !/^#{1,6}\s/.test(lines[i]) &&
      !bullet.test(lines[i]) &&
      !numbered.test(lines[i]) &&
      !/^\s*&gt;/.test(lines[i])
    ) {
      para.push(inline(lines[i]));
      i += 1;
    }
    html.push(`<p>${para.join("<br>")}</p>`);
  }
  return html.join("\n");
}
