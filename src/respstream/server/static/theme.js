// Manual theme choice next to the system one: "system" follows prefers-color-scheme; light/dark pin it.
const KEY = "respstream.theme";

export function initTheme(select) {
  const apply = (value) => {
    if (value === "light" || value === "dark") document.documentElement.dataset.theme = value;
    else delete document.documentElement.dataset.theme;
  };
  const saved = localStorage.getItem(KEY) || "system";
  select.value = ["system", "light", "dark"].includes(saved) ? saved : "system";
  apply(select.value);
  select.addEventListener("change", () => {
    localStorage.setItem(KEY, select.value);
    apply(select.value);
  });
}
