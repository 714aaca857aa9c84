// Memory search (POST /search with explain; without a query, the paged GET /memories) and the
// memory page (GET /memories/{id}, /versions, /strength; PATCH, POST /pin, POST /keep, DELETE).
import { call, get, query } from "./api.js";
import { badge, h, link, num, short, when } from "./dom.js";
import { go, say } from "./app.js";
import { strengthChart } from "./chart.js";
import { agentScope, exactFilter, projectChoice, projectList, projectSelect } from "./projects.js";

const TYPES = ["fact", "strategy", "assumption", "failure", "handoff", "progress"];
const PAGE = 50;

export function memoriesPage(params) {
  const f = {
    q: params.get("q") || "", type: params.get("type") || "", tag: params.get("tag") || "",
    task: params.get("task") || "", as_of: params.get("as_of") || "",
    offset: Math.max(0, parseInt(params.get("offset") || "0", 10) || 0),
    project: projectChoice(params),
  };
  return {
    refresh: false, // a search reinforces what it finds: run it when asked, not on a timer
    load: async () => {
      const projects = await projectList();
      if (f.q) {
        const body = { query: f.q, limit: 20, explain: true };
        if (f.type) body.memory_type = f.type;
        if (f.tag) body.tags = [f.tag];
        if (f.task) body.task_id = f.task;
        if (f.as_of) body.as_of = f.as_of;
        const scope = agentScope(f.project);
        if (scope.all_projects) body.all_projects = true;
        return { projects, search: await call("POST", "/search" + query({ project: scope.project }), body) };
      }
      const q = new URLSearchParams(query({ memory_type: f.type, tag: f.tag, task_id: f.task,
        as_of: f.as_of, offset: f.offset, limit: PAGE }).slice(1));
      exactFilter(f.project, q);
      return { projects, list: await get(`/memories?${q}`) };
    },
    render: (data) => h("section", {},
      h("h1", {}, "Memories"),
      filters(f, data.projects),
      data.search ? results(data.search, f) : page(data.list, f)),
  };
}

function filters(f, projects) {
  const field = (name, label, attrs = {}) => h("label", { class: attrs.grow ? "grow" : "" }, label,
    h("input", { name, value: f[name], ...attrs, grow: null }));
  const type = h("select", { name: "type" }, h("option", { value: "" }, "any"),
    TYPES.map((t) => h("option", { value: t, selected: t === f.type }, t)));
  return h("form", { class: "filters", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    const data = new FormData(ev.target);
    const q = new URLSearchParams();
    for (const [k, v] of data) if (String(v).trim()) q.set(k, String(v).trim());
    go(`#/memories${q.toString() ? "?" + q : ""}`);
  } },
  field("q", "Search (empty: list newest first)", { type: "search", grow: true, id: "q", placeholder: "what to look for" }),
  h("label", {}, "Type", type),
  projectSelect(projects, f.project),
  field("tag", "Tag", { size: 10 }),
  field("task", "Task id", { size: 14 }),
  field("as_of", "As of (ISO date)", { size: 12, placeholder: "2026-01-31" }),
  h("button", { type: "submit" }, "Search"));
}

function results(r, f) {
  const hits = r.memories;
  return h("div", {},
    r.degraded ? h("p", { class: "error" }, r.degraded) : null,
    r.read_as ? h("p", { class: "read-as" }, "Searched " + Object.entries(r.read_as).map(([w, as]) =>
      `“${w}” as ${as.join(" or ")}`).join(", ") + ".") : null,
    f.project.startsWith("p:") ? h("p", { class: "muted" },
      `Searching as an agent in ${f.project.slice(2)} does: its memories and those of no project.`) : null,
    h("p", { class: "muted" }, `${hits.length} hit${hits.length === 1 ? "" : "s"} (search counts as a recall: it strengthens what it finds)`),
    hits.map((m) => h("article", { class: "hit" },
      h("div", { class: "row" }, badge(m.memory_type), m.pinned ? badge("pinned") : null,
        h("span", {}, `score ${num(m.score, 4)}`), h("span", { class: "muted" }, `quality ${num(m.quality_score)}`),
        when(m.created_at)),
      h("p", { class: "content" }, link(`#/memory/${encodeURIComponent(m.id)}`, short(m.content, 400))),
      m.explain ? h("details", {}, h("summary", {}, "Score breakdown"),
        h("table", { class: "explain" }, h("tbody", {}, Object.entries(m.explain).map(([k, v]) =>
          h("tr", {}, h("th", {}, k), h("td", { class: "num" }, num(v, 6))))))) : null)),
    r.related_failures && r.related_failures.length ? [h("h2", {}, "Related failures"),
      h("ul", {}, r.related_failures.map((x) => h("li", {}, `${x.component}: ${x.content}`)))] : null);
}

function page(list, f) {
  const to = (offset) => {
    const q = new URLSearchParams();
    for (const k of ["type", "tag", "task", "as_of", "project"]) if (f[k]) q.set(k, f[k]);
    if (offset) q.set("offset", offset);
    return `#/memories${q.toString() ? "?" + q : ""}`;
  };
  const end = Math.min(list.offset + list.memories.length, list.total);
  return h("div", {},
    h("div", { class: "pager" },
      h("span", {}, list.total ? `${list.offset + 1}–${end} of ${list.total}` : "No memories match."),
      list.offset > 0 ? link(to(Math.max(0, list.offset - PAGE)), "← Newer") : null,
      end < list.total ? link(to(list.offset + PAGE), "Older →") : null),
    h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Memory"), h("th", {}, "Type"), h("th", { class: "num" }, "Strength"), h("th", {}, "Created"))),
      h("tbody", {}, list.memories.map((m) => h("tr", {},
        h("td", { class: "content" }, link(`#/memory/${encodeURIComponent(m.id)}`, short(m.content, 200)),
          m.tags.length ? h("div", { class: "muted" }, m.tags.map((t) => `#${t}`).join(" ")) : null,
          h("div", { class: "muted project" }, m.project ? `project ${m.project}` : "no project"),
          m.shared_by ? h("div", { class: "muted shared" }, `shared by ${m.shared_by}`) : null),
        h("td", {}, badge(m.memory_type), " ", h("span", { class: "tier" }, badge(m.tier)), m.pinned ? [" ", badge("pinned")] : null,
          m.status !== "active" ? [" ", badge(m.status)] : null, m.expires_at ? h("div", { class: "muted" }, `expires ${when(m.expires_at)}`) : null),
        h("td", { class: "num" }, num(m.strength)),
        h("td", {}, when(m.created_at)))))));
}

export function memoryPage(id) {
  const path = `/memories/${encodeURIComponent(id)}`;
  return {
    load: async () => {
      const [m, versions, curve] = await Promise.all([get(path), get(`${path}/versions`), get(`${path}/strength`)]);
      return { m, versions, curve };
    },
    render: ({ m, versions, curve }, redraw) => {
      const act = (fn, done) => async () => {
        try { await fn(); say(done); redraw(); } catch (e) { say(e.message, true); }
      };
      const editor = h("textarea", { id: "edit", "aria-label": "Content" }, m.content);
      return h("section", {},
        h("p", {}, link("#/memories", "← Memories")),
        h("h1", {}, `${m.memory_type} memory `, badge(m.status), " ", badge(m.tier), m.pinned ? [" ", badge("pinned")] : null,
          m.expired ? [" ", badge("expired")] : null),
        h("p", { class: "content", id: "content" }, m.content),
        h("dl", { class: "kv" },
          h("dt", {}, "id"), h("dd", {}, m.id),
          h("dt", {}, "created"), h("dd", {}, when(m.created_at)),
          h("dt", {}, "tier"), h("dd", { id: "tier" }, `${m.tier} (decays ×${curve.tier_factor} as slowly as its type alone)`),
          h("dt", {}, "expires"), h("dd", { id: "expires" }, m.expires_at ? `${when(m.expires_at)}${m.expired ? " (expired: no longer returned)" : ""}` : "never"),
          h("dt", {}, "importance"), h("dd", {}, num(m.importance, 2)),
          h("dt", {}, "recalls"), h("dd", {}, String(m.recall_count)),
          h("dt", {}, "quality"), h("dd", {}, num(m.quality_score)),
          h("dt", {}, "tags"), h("dd", {}, m.tags.length ? m.tags.join(", ") : "none"),
          h("dt", {}, "task"), h("dd", {}, m.task_id ? link(`#/task/${encodeURIComponent(m.task_id)}`, m.task_id) : "none"),
          m.metadata && m.metadata.shared ? [h("dt", {}, "shared by"),
            h("dd", { id: "shared-by" }, `${m.metadata.shared.by} · ${m.metadata.shared.machine} · ${when(m.metadata.shared.at)}`)] : null),
        h("h2", {}, "Strength over time"),
        h("p", {}, `now ${num(curve.strength_now)} · stability ${num(curve.stability_days, 1)} days · `,
          curve.days_until_prune === null ? "pinned: never pruned" : `below the prune threshold in ${curve.days_until_prune} days if not recalled`),
        strengthChart(curve),
        h("h2", {}, "Curate"),
        h("div", { class: "row" },
          h("button", { type: "button", id: "pin", onclick: act(() => call("POST", `${path}/pin`, { pinned: !m.pinned }), m.pinned ? "Unpinned." : "Pinned.") },
            m.pinned ? "Unpin" : "Pin"),
          // What capture stored on its own (#/captured): the user may vouch for it.
          m.status === "active" ? h("label", {}, "Tier ", h("select", { id: "set-tier", onchange: (ev) => act(() => call("POST", `${path}/tier`, { tier: ev.target.value }), `Moved to ${ev.target.value}.`)() },
            ["working", "episodic", "semantic", "procedural"].map((t) => h("option", t === m.tier ? { value: t, selected: "" } : { value: t }, t)))) : null,
          m.tags.includes("auto-capture") ? h("button", { type: "button", id: "keep", onclick: act(() => call("POST", `${path}/keep`), "Kept: no longer marked automatic.") }, "Keep") : null,
          h("button", { type: "button", class: "danger", id: "forget", onclick: async () => {
            if (!confirm("Forget this memory for good? Its text and history are deleted.")) return;
            try { await call("DELETE", path); say("Forgotten."); go("#/memories"); } catch (e) { say(e.message, true); }
          } }, "Forget")),
        m.status === "active" ? h("form", { onsubmit: (ev) => { ev.preventDefault(); act(() => call("PATCH", path, { content: editor.value }), "Saved; the old text is in the history.")(); } },
          h("label", { for: "edit" }, "Edit the text"), editor, h("p", {}, h("button", { type: "submit" }, "Save"))) : null,
        h("h2", {}, "Versions"),
        versionTable(versions, m.id),
        h("h2", {}, "History"),
        m.history.length ? h("ol", { class: "timeline" }, m.history.map((e) => h("li", {}, when(e.at), badge(e.action), " ",
          e.detail.previous !== undefined ? h("span", { class: "content" }, `was: ${e.detail.previous}`)
            : Object.keys(e.detail).length ? JSON.stringify(e.detail) : ""))) : h("p", { class: "muted" }, "No events."));
    },
  };
}

function versionTable(v, id) {
  const rows = v.chain.map((x) => h("tr", { "aria-current": x.id === id ? "true" : null },
    h("td", { class: "content" }, x.id === id ? h("strong", {}, short(x.content, 200)) : link(`#/memory/${encodeURIComponent(x.id)}`, short(x.content, 200))),
    h("td", {}, badge(x.status)), h("td", {}, when(x.valid_from)), h("td", {}, x.valid_to ? when(x.valid_to) : "now")));
  return h("div", {},
    h("table", { "aria-label": "Supersession chain" },
      h("thead", {}, h("tr", {}, h("th", {}, "Version (oldest first)"), h("th", {}, "Status"), h("th", {}, "Valid from"), h("th", {}, "Valid to"))),
      h("tbody", {}, rows)),
    v.consolidated_from.length ? [h("p", {}, "Consolidated from:"), h("ul", {}, v.consolidated_from.map((x) =>
      h("li", {}, link(`#/memory/${encodeURIComponent(x.id)}`, short(x.content, 160)), " ", badge(x.status))))] : null,
    v.consolidated_from_missing.length ? h("p", { class: "muted" }, `${v.consolidated_from_missing.length} source(s) since pruned.`) : null);
}
