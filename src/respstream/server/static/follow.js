// Keep the live turn in view. How this works: the composer sticks to the bottom of the window, so its height is
// reserved as the document's scroll-padding-bottom (kept current by a ResizeObserver): anything scrolled "into view"
// lands above it, never under it. Sending scrolls the new turn's question to the top of the window; while the answer
// streams, its end is kept in view as it grows, until the reader scrolls up (wheel, touch, keys) to read something
// else: then the page stays where they put it. Earlier turns stay in the page above, a scroll away.

const READING_KEYS = new Set(["PageUp", "ArrowUp", "Home"]);
const MARGIN = 12; // px between the answer's end and the composer (the CSS scroll-padding's 0.75rem)

export class Follow {
  /** `composer`: the sticky composer; `ignore`: a selector whose own scrolling (the event timeline) is not ours. */
  constructor(composer, ignore = "") {
    this.composer = composer;
    this.following = false;
    const reserve = () => {
      document.documentElement.style.setProperty("--composer-height", `${Math.ceil(composer.offsetHeight)}px`);
    };
    new ResizeObserver(reserve).observe(composer);
    reserve();
    const away = (event) => {
      if (ignore && event.target instanceof Element && event.target.closest(ignore)) return;
      this.following = false;
    };
    addEventListener("wheel", (event) => { if (event.deltaY < 0) away(event); }, { passive: true });
    addEventListener("touchmove", away, { passive: true });
    addEventListener("keydown", (event) => {
      const typing = event.target instanceof Element && event.target.closest("input, textarea, select");
      if (READING_KEYS.has(event.key) && !typing) away(event);
    });
  }

  /** A turn was sent: show its question at the top of the window and follow its answer. */
  start(question) {
    this.following = true;
    question.scrollIntoView({ block: "start" });
  }

  /** The answer grew: keep its end above the composer while following. */
  update(end) {
    if (!this.following) return;
    // One layout read per frame (the render has just changed the answer) and a plain scrollBy: no smooth scrolling
    // or scrollIntoView work on every delta of a long answer.
    const over = end.getBoundingClientRect().bottom - (innerHeight - this.composer.offsetHeight - MARGIN);
    if (over > 0) scrollBy(0, over);
  }

  /** The stream ended: stop following (the next send starts again). */
  stop() {
    this.following = false;
  }
}
