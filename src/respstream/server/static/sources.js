// Search results and citations: web_search / web_fetch outputs as cards (title, URL, snippet), and
// url_citation annotations in the answer linked to their card. Only http(s) URLs ever become links.

const SAFE = /^https?:\/\//i;
export const CITE_OPEN = "\uE000";
export const CITE_CLOSE = "\uE001";

function host(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

function parseSearch(output) {
  let list;
  try {
    list = JSON.parse(output);
  } catch {
    return null;
  }
  if (!Array.isArray(list)) return null;
  return list.filter((r) => r && typeof r.url === "string")
    .map((r) => ({ title: String(r.title || r.url), url: r.url, snippet: String(r.snippet || r.content || "") }));
}

// web_fetch answers "URL: …\nStatus: …\nTitle: …\n\n<text>".
function parseFetch(output) {
  if (typeof output !== "string" || !output.startsWith("URL: ")) return null;
  const [head, ...rest] = output.split("\n\n");
  const fields = {};
  for (const line of head.split("\n")) {
    const at = line.indexOf(": ");
    if (at > 0) fields[line.slice(0, at)] = line.slice(at + 2);
  }
  if (!fields.URL) return null;
  const text = rest.join("\n\n").replace(/\s+/g, " ").trim();
  return [{ title: fields.Title || fields.URL, url: fields.URL, snippet: text.slice(0, 240) }];
}

/** Cards from the response's tool items, then any cited URL that no tool result named. */
export function collectSources(state) {
  const cards = [];
  const byUrl = new Map();
  const add = (card, via) => {
    if (byUrl.has(card.url)) return byUrl.get(card.url);
    const entry = { ...card, via, n: cards.length + 1 };
    cards.push(entry);
    byUrl.set(card.url, entry);
    return entry;
  };
  for (const it of state.tools()) {
    const name = it.type === "web_search_call" ? "web_search" : it.name;
    if (name !== "web_search" && name !== "web_fetch") continue;
    const output = typeof it.output === "string" ? it.output : it.output == null ? null : JSON.stringify(it.output);
    const found = (output && (parseSearch(output) || parseFetch(output))) || [];
    for (const card of found) add(card, name);
    for (const src of it.sources || []) if (src && src.url) add({ title: src.title || src.url, url: src.url, snippet: "" }, name);
  }
  for (const a of state.annotations()) {
    if (a.type === "url_citation" && typeof a.url === "string") add({ title: a.title || a.url, url: a.url, snippet: "" }, "citation");
  }
  return { cards, byUrl };
}

// A cited span that is itself the model's marker ("[1]", "[1, 2]"): the link replaces it instead of following it.
const MARKER = /^\[\d{1,3}(?:, ?\d{1,3})*\]$/;

/** UTF-16 offsets of code-point offsets (the gateway's indices are Python string indices; JS strings count UTF-16
 * units, so text with emoji before a citation would shift). One pass over the text. */
function utf16Offsets(text, indices) {
  const out = new Map();
  if (!/[\uD800-\uDFFF]/.test(text)) {
    for (const i of indices) out.set(i, Math.min(i, text.length));
    return out;
  }
  const wanted = [...new Set(indices)].sort((a, b) => a - b);
  let cp = 0;
  let unit = 0;
  let k = 0;
  while (k < wanted.length) {
    if (wanted[k] <= cp || unit >= text.length) {
      out.set(wanted[k], unit);
      k += 1;
      continue;
    }
    unit += text.codePointAt(unit) > 0xffff ? 2 : 1;
    cp += 1;
  }
  return out;
}

function index(value) {
  const n = Number(value);
  return Number.isInteger(n) && n >= 0 ? n : 0;
}

/** Put a numbered link marker (numbered like the cards) after each cited span, or in place of a span that is the
 * model's own [n] marker. Per part; indices are the annotations' (code points into the part's final text). */
export function markCitations(parts, byUrl) {
  let out = "";
  for (const { text, annotations } of parts) {
    const clean = text.replaceAll(CITE_OPEN, "").replaceAll(CITE_CLOSE, "");
    const cited = annotations.filter((a) => a && a.type === "url_citation" && byUrl.has(a.url));
    const at = utf16Offsets(clean, cited.flatMap((a) => [index(a.start_index), index(a.end_index)]));
    const spans = new Map(); // "start:end" -> {start, end, numbers}
    for (const a of cited) {
      const end = at.get(index(a.end_index));
      const start = Math.min(at.get(index(a.start_index)), end);
      const key = `${start}:${end}`;
      if (!spans.has(key)) spans.set(key, { start, end, numbers: [] });
      const n = byUrl.get(a.url).n;
      if (!spans.get(key).numbers.includes(n)) spans.get(key).numbers.push(n);
    }
    let last = 0;
    for (const span of [...spans.values()].sort((x, y) => x.end - y.end || x.start - y.start)) {
      const replace = span.start >= last && MARKER.test(clean.slice(span.start, span.end));
      const cut = replace ? span.start : Math.max(last, span.end);
      out += clean.slice(last, cut) + span.numbers.map((n) => CITE_OPEN + n + CITE_CLOSE).join("");
      last = Math.max(cut, replace ? span.end : cut);
    }
    out += clean.slice(last);
  }
  return out;
}

/** Turn the markers (which survive markdown escaping untouched) into links to the cards. */
export function linkCitations(html) {
  return html.replace(/\uE000(\d+)\uE001/g,
    (_, n) => `<sup class="cite"><a href="#source-${n}" aria-label="source ${n}">[${n}]</a></sup>`);
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Render the cards into `box`. */
export function renderSources(box, cards) {
  box.replaceChildren();
  if (cards.length === 0) return;
  box.append(el("div", "sources-title", "Sources"));
  const list = el("ol", "source-list");
  for (const card of cards) {
    const li = el("li", "source-card");
    li.id = `source-${card.n}`;
    li.dataset.via = card.via;
    const title = SAFE.test(card.url) ? el("a", "source-title", card.title) : el("span", "source-title", card.title);
    if (SAFE.test(card.url)) {
      title.href = card.url;
      title.target = "_blank";
      title.rel = "noopener noreferrer nofollow";
    }
    li.append(el("span", "source-n", String(card.n)), title, el("span", "source-url mono", host(card.url)));
    if (card.snippet) li.append(el("p", "source-snippet", card.snippet));
    list.append(li);
  }
  box.append(list);
}
