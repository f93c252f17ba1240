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

/** Insert citation markers after each cited span (per part, at end_index), numbered like the cards. */
export function markCitations(parts, byUrl) {
  let out = "";
  for (const { text, annotations } of parts) {
    const clean = text.replaceAll(CITE_OPEN, "").replaceAll(CITE_CLOSE, "");
    const marks = annotations.filter((a) => a && a.type === "url_citation" && byUrl.has(a.url))
      .map((a) => ({ at: Math.max(0, Math.min(clean.length, Number(a.end_index) || 0)), n: byUrl.get(a.url).n }))
      .sort((x, y) => x.at - y.at);
    let last = 0;
    for (const m of marks) {
      out += clean.slice(last, m.at) + CITE_OPEN + m.n + CITE_CLOSE;
      last = m.at;
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
