// Image input: paste or drop an image (or pick one) when the selected model takes images; sent as input_image
// parts with a data URL. Limits keep one request under the gateway's body limit.

const MAX_IMAGES = 4;
const MAX_BYTES = 4 * 1024 * 1024;

export class Attachments {
  constructor(box, onChange) {
    this.box = box;
    this.urls = [];
    this.onChange = onChange;
    this.enabled = false;
  }

  clear() {
    this.urls = [];
    this.render();
  }

  /** Add image files; returns an error message for the ones refused, or "". */
  async add(files) {
    const refused = [];
    for (const file of files) {
      if (!file.type.startsWith("image/")) continue;
      if (!this.enabled) refused.push(`${file.name || "image"}: the selected model does not take images`);
      else if (this.urls.length >= MAX_IMAGES) refused.push(`at most ${MAX_IMAGES} images per message`);
      else if (file.size > MAX_BYTES) refused.push(`${file.name || "image"} is over ${MAX_BYTES >> 20} MiB`);
      else this.urls.push(await dataUrl(file));
    }
    this.render();
    return refused.join("; ");
  }

  render() {
    this.box.replaceChildren();
    this.urls.forEach((url, i) => {
      const fig = document.createElement("figure");
      fig.className = "attachment";
      const img = document.createElement("img");
      img.src = url;
      img.alt = `attached image ${i + 1}`;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "×";
      remove.setAttribute("aria-label", `Remove image ${i + 1}`);
      remove.addEventListener("click", () => {
        this.urls.splice(i, 1);
        this.render();
      });
      fig.append(img, remove);
      this.box.append(fig);
    });
    if (this.onChange) this.onChange();
  }
}

function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/** A model's input modalities from a /v1/models entry, whatever shape the gateway uses (text when absent). */
export function modalitiesOf(model) {
  if (!model) return ["text"];
  const m = model.input_modalities || (model.modalities && (model.modalities.input || model.modalities));
  return Array.isArray(m) && m.length ? m.map(String) : ["text"];
}
