// Copy text: the async Clipboard API when the page may use it, else a hidden textarea and execCommand.
export async function copyText(text) {
  window.__lastCopied = text; // what the tests compare with (clipboard reads need a permission)
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the legacy path (permission denied, no focus)
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** Wire a button to copy what getText() returns, with a short "Copied" confirmation. */
export function copyButton(button, getText) {
  button.addEventListener("click", async () => {
    const label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    const ok = await copyText(getText());
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => {
      button.textContent = label;
    }, 1200);
  });
}
