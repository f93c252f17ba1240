// A small single-pass syntax highlighter (json, python, javascript, bash and a generic fallback).
// Linear by construction: one left-to-right scan, every step consumes at least one character and no step looks
// back; an unterminated string or comment simply runs to the end of its line. Output is escaped text in <span>s.
import { escapeHtml } from "./markdown.js";

const KEYWORDS = {
  python: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield print",
  javascript: "async await break case catch class const continue default delete do else export false finally for function if import in instanceof let new null of return switch this throw true try typeof undefined var void while yield",
  bash: "if then else fi for do done case esac while function export echo curl respstream",
  json: "true false null",
};
const ALIAS = { py: "python", js: "javascript", ts: "javascript", mjs: "javascript", sh: "bash", shell: "bash",
  zsh: "bash", console: "bash", curl: "bash", jsonc: "json" };
const SETS = Object.fromEntries(Object.entries(KEYWORDS).map(([k, v]) => [k, new Set(v.split(" "))]));

function commentStart(lang, src, i) {
  const c = src[i];
  if ((lang === "python" || lang === "bash") && c === "#") return true;
  if (lang === "javascript" && c === "/" && src[i + 1] === "/") return true;
  return false;
}

/** Highlight `code` as `language`; returns HTML that is safe for innerHTML. */
export function highlight(code, language) {
  const lang = ALIAS[language] || language;
  const keywords = SETS[lang] || new Set();
  const out = [];
  const n = code.length;
  let i = 0;
  let plain = i;
  const flush = (end) => {
    if (end > plain) out.push(escapeHtml(code.slice(plain, end)));
  };
  const emit = (cls, start, end) => {
    flush(start);
    out.push(`<span class="tok-${cls}">${escapeHtml(code.slice(start, end))}</span>`);
    plain = end;
  };
  while (i < n) {
    const c = code[i];
    if (commentStart(lang, code, i) && (i === 0 || /\s/.test(code[i - 1]) || lang !== "bash")) {
      let end = code.indexOf("\n", i);
      if (end === -1) end = n;
      emit("com", i, end);
      i = end;
      continue;
    }
    if (c === '"' || c === "'" || (c === "`" && lang === "javascript")) {
      let j = i + 1;
      while (j < n && code[j] !== c && !(code[j] === "\n" && c !== "`")) {
        j += code[j] === "\\" && lang !== "bash" ? 2 : 1;
      }
      const end = Math.min(j + 1, n);
      let cls = "str";
      if (lang === "json") {
        let k = end;
        while (k < n && (code[k] === " " || code[k] === "\t")) k += 1;
        if (code[k] === ":") cls = "key";
      }
      emit(cls, i, end);
      i = end;
      continue;
    }
    if (/[0-9]/.test(c) && (i === 0 || !/[\w$]/.test(code[i - 1]))) {
      let j = i + 1;
      while (j < n && /[0-9a-fA-FxX._eE+-]/.test(code[j]) && !(/[+-]/.test(code[j]) && !/[eE]/.test(code[j - 1]))) j += 1;
      emit("num", i, j);
      i = j;
      continue;
    }
    if (/[A-Za-z_$]/.test(c)) {
      let j = i + 1;
      while (j < n && /[\w$-]/.test(code[j]) && !(code[j] === "-" && lang !== "bash")) j += 1;
      const word = code.slice(i, j);
      if (keywords.has(word)) emit("kw", i, j);
      else if (lang === "bash" && word.startsWith("-")) emit("flag", i, j);
      i = j;
      continue;
    }
    if (lang === "bash" && c === "-" && (i === 0 || /\s/.test(code[i - 1]))) {
      let j = i + 1;
      while (j < n && /[\w-]/.test(code[j])) j += 1;
      emit("flag", i, j);
      i = j;
      continue;
    }
    i += 1;
  }
  flush(n);
  return out.join("");
}

/** Highlight every `pre[data-lang] > code` inside `root` (markdown code blocks). */
export function highlightBlocks(root) {
  for (const code of root.querySelectorAll("pre[data-lang] > code")) {
    const lang = code.parentElement.dataset.lang.toLowerCase();
    if (!(ALIAS[lang] || SETS[lang])) continue;
    code.innerHTML = highlight(code.textContent, lang);
  }
}
