// Hash routes (#/tasks, #/task/<id>, #/memories?..., #/memory/<id>, #/captured, #/upkeep), the login form,
// and a quiet refresh that redraws a page only when its data changed.
import { Unauthorized, get, setToken, token } from "./api.js";
import { h } from "./dom.js";
import { boardPage, taskPage } from "./tasks.js";
import { memoriesPage, memoryPage } from "./memories.js";
import { capturedPage } from "./captured.js";
import { upkeepPage } from "./upkeep.js";

const ROUTES = [
  [/^#\/tasks(?:\?(.*))?$/, "tasks", (q) => boardPage(new URLSearchParams(q || ""))],
  [/^#\/task\/(.+)$/, "tasks", (id) => taskPage(decodeURIComponent(id))],
  [/^#\/memories(?:\?(.*))?$/, "memories", (q) => memoriesPage(new URLSearchParams(q || ""))],
  [/^#\/memory\/(.+)$/, "memories", (id) => memoryPage(decodeURIComponent(id))],
  [/^#\/captured(?:\?(.*))?$/, "captured", (q) => capturedPage(new URLSearchParams(q || ""))],
  [/^#\/upkeep$/, "upkeep", () => upkeepPage()],
];
const REFRESH_MS = 4000;
const main = document.getElementById("main");
let current = null; // {hash, page, timer}

export function say(text, isError = false) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = isError ? "error" : "";
}

export function go(hash) {
  if (location.hash === hash) route(); else location.hash = hash;
}

function match(hash) {
  for (const [re, section, make] of ROUTES) {
    const m = hash.match(re);
    if (m) return { section, make: () => make(...m.slice(1)) };
  }
  return null;
}

async function route() {
  if (!location.hash || !match(location.hash)) { location.replace("#/tasks"); return; }
  const { section, make } = match(location.hash);
  for (const a of document.querySelectorAll("header nav a")) {
    a.toggleAttribute("aria-current", a.dataset.section === section);
    if (a.dataset.section === section) a.setAttribute("aria-current", "page");
  }
  if (current) clearInterval(current.timer);
  // This navigation's own state: once another navigation replaces `current`, whatever this one
  // still awaits is dropped (draw checks it after its await), so a slow page never paints over
  // the one the user went to next.
  const state = { hash: location.hash, page: make(), timer: null, last: null };
  current = state;
  // A message an action left ("Forgotten.") stays until the next one; "Loading…" only fills silence.
  const status = document.getElementById("status");
  if (!status.textContent) say("Loading…");
  try {
    if (!await draw(state, true)) return;
    if (status.textContent === "Loading…") say("");
  } catch (e) {
    if (state === current) failed(e);
    return;
  }
  if (state.page.refresh !== false) {
    state.timer = setInterval(() => {
      if (document.hidden || state !== current) return;
      draw(state, false).catch(failed);
    }, state.page.refresh || REFRESH_MS);
  }
}

// A page is {load: async () => data, render: (data, redraw) => Node, refresh?: false | ms}; drawn
// again only when its data changed, so focus and what the user is typing survive a refresh.
// Returns whether it drew: not when a later navigation (or the login form) took over meanwhile.
async function draw(state, first) {
  const data = await state.page.load();
  if (state !== current) return false;
  const key = JSON.stringify(data);
  if (!first && key === state.last) return false;
  if (!first && main.contains(document.activeElement) && document.activeElement.matches("input, textarea, select")) return false;
  state.last = key;
  const node = state.page.render(data, () => draw(state, true).catch((e) => state === current && failed(e)));
  const kept = keepTyping(node);
  main.replaceChildren(node);
  if (kept) kept();
  else if (first) main.focus({ preventScroll: true });
  return true;
}

// A page drawn while the user is in one of its fields (they clicked a section and started typing
// before it arrived) keeps them there: the same field of the new page (same id) gets the focus,
// and what they typed with its caret, so their keystrokes and Enter go on where they were and
// not into the page's default. A focused field counts even before its first keystroke: text can
// arrive just after the render. Returns the step to run once the node is in the page (focus
// needs it there), or null when no field of the page has the focus.
function keepTyping(node) {
  const el = document.activeElement;
  if (!el || !el.id || !main.contains(el) || !el.matches("input, textarea")) return null;
  const twin = node.querySelector(`#${CSS.escape(el.id)}`);
  if (!twin || twin.tagName !== el.tagName || twin.type !== el.type) return null;
  const typed = el.value !== el.defaultValue;
  const { selectionStart, selectionEnd } = el;
  if (typed) twin.value = el.value;
  return () => {
    twin.focus({ preventScroll: true });
    if (selectionStart !== null && twin.value === el.value) twin.setSelectionRange(selectionStart, selectionEnd);
  };
}

function failed(e) {
  if (e instanceof Unauthorized) { showLogin(token() ? "That token was refused." : ""); return; }
  say(e.message, true);
}

function showLogin(problem) {
  if (current) clearInterval(current.timer);
  current = null;
  setToken("");
  document.getElementById("logout").hidden = true;
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "current-password", required: true });
  const form = h("form", { class: "login", onsubmit: async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    try {
      await get("/stats");
      say("");
      document.getElementById("logout").hidden = false;
      route();
    } catch (e) {
      failed(e);
    }
  } },
  h("h1", {}, "Log in to engram"),
  h("p", {}, "This server needs its token (ENGRAM_TOKEN). It is kept in this tab only (sessionStorage) and sent as a bearer token."),
  h("label", { for: "token" }, "Token", input),
  h("p", {}, h("button", { type: "submit" }, "Log in")));
  main.replaceChildren(form);
  say(problem, Boolean(problem));
  input.focus();
}

document.getElementById("logout").addEventListener("click", () => { setToken(""); showLogin(""); });
document.getElementById("logout").hidden = !token();
window.addEventListener("hashchange", route);
route();
