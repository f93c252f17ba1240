// Conversations kept in the browser (localStorage): threads of turns, each turn continued from the previous
// answer with previous_response_id. Images are kept in memory only (a data URL would fill the storage quota).

const KEY = "respstream.threads";
const MAX_THREADS = 30;
const MAX_TURNS = 200;

function newId() {
  return `t${Date.now().toString(36)}${Math.random().toString(36).slice(2, 7)}`;
}

function blank() {
  return { id: newId(), title: "New chat", updated: Date.now(), turns: [] };
}

export class ThreadStore {
  constructor(storage = window.localStorage) {
    this.storage = storage;
    this.saveError = null;
    this.threads = [];
    this.currentId = null;
    try {
      const saved = JSON.parse(storage.getItem(KEY) || "null");
      if (saved && Array.isArray(saved.threads)) {
        this.threads = saved.threads.filter((t) => t && typeof t.id === "string" && Array.isArray(t.turns));
        this.currentId = saved.current;
      }
    } catch {
      this.threads = []; // unreadable storage: start afresh rather than fail
    }
    if (!this.current) this.newThread();
  }

  get current() {
    return this.threads.find((t) => t.id === this.currentId) || null;
  }

  newThread() {
    const empty = this.threads.find((t) => t.turns.length === 0);
    const thread = empty || blank();
    if (!empty) this.threads.unshift(thread);
    this.threads = this.threads.slice(0, MAX_THREADS);
    this.currentId = thread.id;
    this.save();
    return thread;
  }

  select(id) {
    if (this.threads.some((t) => t.id === id)) {
      this.currentId = id;
      this.save();
    }
    return this.current;
  }

  /** The response the next turn continues: the last turn that produced a stored answer. */
  lastResponseId() {
    const turns = this.current.turns;
    for (let i = turns.length - 1; i >= 0; i -= 1) {
      const t = turns[i];
      if (t.responseId && ["completed", "incomplete"].includes(t.status)) return t.responseId;
    }
    return null;
  }

  lastTurn() {
    const turns = this.current.turns;
    return turns.length ? turns[turns.length - 1] : null;
  }

  /** Append a turn (or replace the last one: edit-and-resend, regenerate). Returns the turn. */
  addTurn(turn, { replaceLast = false } = {}) {
    const thread = this.current;
    if (replaceLast && thread.turns.length) thread.turns.pop();
    thread.turns.push(turn);
    thread.turns = thread.turns.slice(-MAX_TURNS);
    if (thread.turns.length === 1) thread.title = turn.input.slice(0, 60) || "New chat";
    thread.updated = Date.now();
    this.save();
    return turn;
  }

  save() {
    const plain = this.threads.map((t) => ({ ...t, turns: t.turns.map(({ imageUrls, ...rest }) => rest) }));
    try {
      this.storage.setItem(KEY, JSON.stringify({ current: this.currentId, threads: plain }));
      this.saveError = null;
    } catch (err) {
      this.saveError = `conversation not saved: ${err.message}`; // quota full or storage disabled
    }
  }
}
