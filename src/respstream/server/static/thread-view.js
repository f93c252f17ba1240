// Earlier turns of the conversation, rendered above the live one (model text only through renderMarkdown).
import { highlightBlocks } from "./highlight.js";
import { renderMarkdown } from "./markdown.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Give every code block in `root` a copy button (clicks are handled once, by delegation, in app.js). */
export function addCodeCopyButtons(root) {
  for (const pre of root.querySelectorAll("pre")) {
    if (pre.querySelector(".copy-code")) continue;
    const button = el("button", "copy-code", "Copy");
    button.type = "button";
    button.setAttribute("aria-label", "Copy code");
    pre.prepend(button);
  }
}

export function renderThread(list, turns) {
  list.replaceChildren();
  turns.forEach((turn, i) => {
    const li = el("li", "turn past");
    li.dataset.turn = String(i);
    const user = el("div", "bubble user", turn.input);
    if (turn.images) user.append(el("span", "dim small", ` (+${turn.images} image${turn.images > 1 ? "s" : ""})`));
    const answer = el("div", "bubble assistant answer markdown");
    answer.innerHTML = renderMarkdown(turn.text || "");
    highlightBlocks(answer);
    addCodeCopyButtons(answer);
    const meta = el("div", "turn-meta dim small mono",
      [turn.model, turn.status, turn.responseId].filter(Boolean).join(" · "));
    li.append(user, answer, meta);
    list.append(li);
  });
}

export function renderThreadChoices(select, store) {
  select.replaceChildren();
  for (const t of store.threads) {
    const label = `${t.title}${t.turns.length ? ` (${t.turns.length})` : ""}`;
    select.append(new Option(label, t.id, false, t.id === store.currentId));
  }
}
