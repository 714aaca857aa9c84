// Task board (GET /tasks) and task page (GET /tasks/{id}, GET /tasks/{id}/sessions, PATCH /tasks/{id}).
import { call, get, query } from "./api.js";
import { ago, badge, h, link, short, when } from "./dom.js";
import { go, say } from "./app.js";
import { agentScope, projectChoice, projectList, projectSelect } from "./projects.js";

const STATUSES = ["open", "in_progress", "blocked", "done", "abandoned"];

export function boardPage(params) {
  const choice = projectChoice(params);
  return {
    load: async () => {
      const [projects, { tasks }] = await Promise.all([projectList(),
        get("/tasks" + query({ limit: 1000, ...agentScope(choice) }))]);
      return { projects, tasks };
    },
    render: ({ projects, tasks }) => h("section", {},
      h("h1", {}, "Tasks"),
      h("form", { class: "filters", onchange: (ev) => {
        const v = ev.target.value;
        go(v ? `#/tasks?project=${encodeURIComponent(v)}` : "#/tasks");
      } }, projectSelect(projects, choice),
      choice.startsWith("p:") ? h("span", { class: "muted" }, "its tasks and those of no project, as its agents see them") : null),
      tasks.length ? null : h("p", { class: "muted" }, "No tasks yet: agents create them with create_task."),
      h("div", { class: "board" }, STATUSES.map((st) => {
        const mine = tasks.filter((t) => t.status === st);
        return h("section", { class: "column", "aria-label": `${st.replace("_", " ")} tasks` },
          h("h2", {}, `${st.replace("_", " ")} (${mine.length})`),
          mine.map((t) => h("a", { class: "card", href: `#/task/${encodeURIComponent(t.id)}` },
            h("strong", {}, t.name),
            h("small", {}, `last activity ${ago(t.last_activity_at)}`),
            t.last_activity ? h("small", {}, `${t.last_activity.memory_type}: ${short(t.last_activity.content, 90)}`) : null)));
      }))),
  };
}

export function taskPage(id) {
  const path = `/tasks/${encodeURIComponent(id)}`;
  return {
    load: async () => {
      const [view, sessions] = await Promise.all([get(path), get(`${path}/sessions`)]);
      return { view, sessions: sessions.sessions };
    },
    render: ({ view, sessions }, redraw) => {
      const t = view.task;
      const setStatus = async (st) => {
        try {
          await call("PATCH", path, { status: st });
          say(`Status set to ${st.replace("_", " ")}.`);
          redraw();
        } catch (e) { say(e.message, true); }
      };
      return h("section", {},
        h("p", {}, link("#/tasks", "← All tasks")),
        h("h1", {}, t.name, " ", badge(t.status)),
        h("p", { class: "content" }, t.goal || h("span", { class: "muted" }, "No goal recorded.")),
        h("div", { class: "row", role: "group", "aria-label": "Change status" },
          h("span", { class: "muted" }, "Set status:"),
          STATUSES.map((st) => h("button", { type: "button", class: st === t.status ? "" : "secondary",
            "aria-pressed": String(st === t.status), disabled: st === t.status, onclick: () => setStatus(st) },
            st.replace("_", " ")))),
        h("h2", {}, "Plan"),
        planTable(view.plan),
        h("h2", {}, "Timeline"),
        view.counts.timeline > view.timeline.length
          ? h("p", { class: "muted" }, `The newest ${view.timeline.length} of ${view.counts.timeline} entries.`) : null,
        timeline(view.timeline, sessions));
    },
  };
}

function planTable(plan) {
  if (!plan.length) return h("p", { class: "muted" }, "No plan: no handoff of this task named next steps.");
  return h("table", { "aria-label": "Plan" },
    h("thead", {}, h("tr", {}, h("th", {}, "Step"), h("th", {}, "Status"), h("th", {}, "Evidence"))),
    h("tbody", {}, plan.map((p) => h("tr", { "data-step": p.step },
      h("td", {}, p.step, p.wordings.length > 1 ? h("div", { class: "muted" }, `also worded: ${p.wordings.filter((w) => w !== p.step).join("; ")}`) : null),
      h("td", { class: "step-status" }, badge(p.status)),
      h("td", {}, evidence(p.evidence))))));
}

function evidence(ev) {
  if (!ev) return h("span", { class: "muted" }, "none");
  return h("dl", { class: "kv" }, Object.entries(ev).map(([k, v]) => [
    h("dt", {}, k.replace("_", " ")),
    h("dd", {}, k === "id" || k === "memory_id" ? link(`#/memory/${encodeURIComponent(v)}`, v)
      : typeof v === "object" ? JSON.stringify(v) : String(v))]));
}

function timeline(entries, sessions) {
  // At equal times a session's start comes before what it wrote and its end after (the sort is stable).
  const starts = [], ends = [];
  for (const s of sessions) {
    starts.push({ at: s.started_at, node: h("li", {}, when(s.started_at), badge("session"), ` ${s.client || "client"} session started (${s.id})`) });
    if (s.state !== "active") {
      const end = s.ended_at || s.last_heartbeat;
      ends.push({ at: end, node: h("li", { class: s.state === "interrupted" ? "interrupted" : "" },
        when(end), badge(s.state), ` session ${s.id}`,
        s.state === "interrupted" ? h("strong", {}, ` interrupted: ${s.reason}`) : " ended",
        s.outcome ? [" · outcome ", badge(s.outcome)] : null) });
    }
  }
  const items = [...starts, ...entries.map((e) => ({ at: e.created_at, node: entryItem(e) })), ...ends];
  items.sort((a, b) => new Date(a.at) - new Date(b.at));
  if (!items.length) return h("p", { class: "muted" }, "Nothing recorded yet.");
  return h("ol", { class: "timeline" }, items.map((i) => i.node));
}

function entryItem(e) {
  let text = e.content;
  if (e.progress) text = `${e.progress.feature}: ${e.progress.status} (${Math.round((e.progress.completion || 0) * 100)}%)${e.progress.notes ? ` — ${e.progress.notes}` : ""}`;
  if (e.failure) text = `${e.failure.component}: ${e.failure.error}${e.failure.fix ? ` — fix: ${e.failure.fix}` : ""}`;
  return h("li", {}, when(e.created_at), badge(e.memory_type), " ",
    link(`#/memory/${encodeURIComponent(e.id)}`, short(text, 220)),
    e.status !== "active" ? [" ", badge(e.status)] : null);
}
