// What capture stored with no model (GET /memories?tag=auto-capture): pitfalls, conventions and
// episodes, newest first, each to keep (POST /memories/{id}/keep: the user vouches for it, it
// loses its automatic mark) or to delete for good (DELETE /memories/{id}).
import { call, get, query } from "./api.js";
import { badge, h, link, short, when } from "./dom.js";
import { say } from "./app.js";

const CAPTURED_TAG = "auto-capture"; // the mark every capture leaves (engram.continuity.capture)
const PAGE = 50;

// What a capture is, by the tag capture gives it (engram.continuity.capture, .conventions).
function kindOf(m) {
  return ["pitfall", "convention-candidate", "convention", "episode"].find((t) => m.tags.includes(t)) || m.memory_type;
}

export function capturedPage(params) {
  const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
  return {
    load: () => get(`/memories${query({ tag: CAPTURED_TAG, offset, limit: PAGE })}`),
    render: (list, redraw) => h("section", {},
      h("h1", {}, "Captured"),
      h("p", { class: "muted" }, "What the hooks captured on their own, with no model: pitfalls (an error and the ",
        "edit that fixed it), conventions the user stated (a convention-candidate is a rule said once: it is not ",
        "given to the agent until said again in another session or kept), and episodes (a turn's request and answer, which fade ",
        "unless recalled). Keep one to vouch for it: it stops being marked automatic, and an episode becomes a ",
        "fact. Delete one to forget it for good."),
      pager(list, offset),
      list.memories.length ? h("table", { "aria-label": "Captured memories" },
        h("thead", {}, h("tr", {}, h("th", {}, "Kind"), h("th", {}, "Memory"), h("th", {}, "Captured"), h("th", {}, ""))),
        h("tbody", {}, list.memories.map((m) => row(m, redraw)))) : null),
  };
}

function row(m, redraw) {
  const path = `/memories/${encodeURIComponent(m.id)}`;
  const act = (fn, done, after) => async () => {
    try { await fn(); say(done); after(); } catch (e) { say(e.message, true); }
  };
  return h("tr", { "data-id": m.id },
    h("td", {}, badge(kindOf(m))),
    h("td", { class: "content" }, link(`#/memory/${encodeURIComponent(m.id)}`, short(m.content, 300)),
      h("div", { class: "muted project" }, m.project ? `project ${m.project}` : "no project")),
    h("td", {}, when(m.created_at)),
    h("td", { class: "actions" },
      h("button", { type: "button", class: "keep", onclick: act(() => call("POST", `${path}/keep`),
        "Kept: no longer marked automatic.", redraw) }, "Keep"),
      " ",
      h("button", { type: "button", class: "danger delete", onclick: async () => {
        if (!confirm("Delete this captured memory for good?")) return;
        await act(() => call("DELETE", path), "Deleted.", redraw)();
      } }, "Delete")));
}

function pager(list, offset) {
  const to = (o) => `#/captured${o ? `?offset=${o}` : ""}`;
  const end = Math.min(list.offset + list.memories.length, list.total);
  return h("div", { class: "pager" },
    h("span", {}, list.total ? `${list.offset + 1}–${end} of ${list.total}` : "Nothing captured automatically is left to review."),
    offset > 0 ? link(to(Math.max(0, offset - PAGE)), "← Newer") : null,
    end < list.total ? link(to(offset + PAGE), "Older →") : null);
}
