// Upkeep: GET /stats (counts, size, index freshness, what fades soon) and the maintenance
// preview and apply (POST /maintenance {apply: false | true}).
import { call, get } from "./api.js";
import { badge, bytes, h, link, num, short, when } from "./dom.js";
import { say } from "./app.js";

export function upkeepPage() {
  let report = null; // the last preview or run, kept across refreshes of the stats
  return {
    refresh: 30000, // /stats reads every memory's strength: 0.27 s at 100k (benchmarks/panel_bench.py)
    load: () => get("/stats"),
    render: (s, redraw) => {
      const run = (apply) => async () => {
        say(apply ? "Applying…" : "Computing the preview…");
        try {
          report = await call("POST", "/maintenance", { apply });
          say(apply ? `Applied: ${report.gists.length} gists, ${report.consolidated} consolidated, ${report.pruned} pruned.` : "Preview ready: nothing changed yet.");
          redraw();
        } catch (e) { say(e.message, true); }
      };
      const idx = s.index;
      return h("section", {},
        h("h1", {}, "Upkeep"),
        h("div", { class: "grid2" },
          stat("Memories", s.total, Object.entries(s.by_status).map(([k, v]) => `${k} ${v}`).join(" · ")),
          stat("Active by type", Object.values(s.by_type).reduce((a, b) => a + b, 0),
            Object.entries(s.by_type).map(([k, v]) => `${k} ${v}`).join(" · ")),
          stat("Active by tier", Object.values(s.by_tier).reduce((a, b) => a + b, 0),
            Object.entries(s.by_tier).map(([k, v]) => `${k} ${v} (×${s.tier_factors[k]})`).join(" · ")),
          stat("Expiry", `${s.expiry.with_expiry} with a time to live`,
            `${s.expiry.within_7_days} expire within 7 days · ${s.expiry.expired} expired, removed by the next run`),
          stat("Size on disk", bytes(s.disk_bytes), `model ${s.model.name} (${s.model.dim} dims)`),
          stat("Index", idx.fresh ? "fresh" : "stale",
            `${idx.rows} indexed of ${idx.table_rows} rows · ${idx.graph_edges} graph edges · built ${new Date(idx.built_at).toLocaleString()}`),
          lateStat(s.late_interaction),
          stat("Tasks", Object.values(s.tasks).reduce((a, b) => a + b, 0), Object.entries(s.tasks).map(([k, v]) => `${k} ${v}`).join(" · ")),
          stat("Sessions", Object.values(s.sessions).reduce((a, b) => a + b, 0), Object.entries(s.sessions).map(([k, v]) => `${k} ${v}`).join(" · ")),
          stat("Gists", s.gists, `what recurring captures share, written once · ${s.totals.gists_written} written · ${s.totals.gists_updated} updated by later members · ${s.totals.gists_merged ?? 0} merged into an alike one`),
          stat("Maintenance so far", `${s.totals.runs} runs`,
            `${s.totals.consolidated} consolidated · ${s.totals.pruned} pruned · last ${s.totals.last_run ? new Date(s.totals.last_run).toLocaleString() : "never"}`),
          stat("Mean strength", num(s.strength.mean), Object.entries(s.strength.buckets).map(([k, v]) => `${k}: ${v}`).join(" · "))),
        h("h2", {}, `Fades soon (${s.fading_soon.count} below ${s.fading_soon.below} within ${s.fading_soon.within_days} days)`),
        s.fading_soon.memories.length ? h("table", {},
          h("thead", {}, h("tr", {}, h("th", {}, "Memory"), h("th", {}, "Type"), h("th", { class: "num" }, "Strength"), h("th", { class: "num" }, "Days until prune"))),
          h("tbody", {}, s.fading_soon.memories.map((m) => h("tr", {},
            h("td", {}, link(`#/memory/${encodeURIComponent(m.id)}`, m.content)), h("td", {}, badge(m.memory_type), " ", badge(m.tier)),
            h("td", { class: "num" }, num(m.strength)), h("td", { class: "num" }, num(m.days_until_prune, 1))))))
          : h("p", { class: "muted" }, "Nothing fades soon."),
        h("h2", {}, "Consolidate and prune"),
        h("div", { class: "row" },
          h("button", { type: "button", id: "preview", onclick: run(false) }, "Preview"),
          report && !report.applied ? h("button", { type: "button", class: "danger", id: "apply", onclick: run(true) }, "Apply") : null,
          s.maintenance && s.maintenance.next_run ? h("span", { class: "muted" }, `next scheduled run ${new Date(s.maintenance.next_run).toLocaleString()}`) : null),
        report ? reportView(report) : h("p", { class: "muted" }, "Preview shows what a run would merge and prune, changing nothing."));
    },
  };
}

// How far the late-interaction reader has come through the turns of a conversation (the daemon
// fills in their token vectors in the background; docs/ranking.md, "Late interaction").
function lateStat(late) {
  if (!late) return null;
  const left = late.turns - late.turns_read;
  const detail = !late.on ? `off · ${late.turns} turns of a conversation`
    : !late.turns ? "no turns of a conversation yet (it reads only those)"
    : `${late.turns_read} of ${late.turns} turns read` + (left > 0 ? ` · ${left} to fill in the background` : "");
  return stat("Late reader", late.on ? "on" : "off", detail);
}

function stat(label, value, detail) {
  return h("div", { class: "stat" }, h("span", { class: "muted" }, label), h("b", {}, String(value)), h("small", {}, detail));
}

function reportView(r) {
  return h("div", { id: "report" },
    h("p", {}, h("strong", {}, r.applied ? "Applied" : "Preview"), ` (${when(r.started_at).textContent}): `,
      `${r.clusters.length} cluster(s) merging ${r.consolidated} memories, ${r.pruned} to prune`,
      Object.keys(r.pruned_by_reason || {}).length ? ` (${Object.entries(r.pruned_by_reason).map(([k, v]) => `${k} ${v}`).join(", ")})` : "",
      `, ${r.protected} kept although faded.`),
    r.clusters.length ? h("table", { "aria-label": "Clusters" },
      h("thead", {}, h("tr", {}, h("th", {}, "Merged text"), h("th", {}, "Sources"), h("th", {}, "Into"))),
      h("tbody", {}, r.clusters.map((c) => h("tr", {},
        h("td", { class: "content" }, short(c.preview, 300)),
        h("td", {}, c.sources.map((id) => h("div", {}, link(`#/memory/${encodeURIComponent(id)}`, id)))),
        h("td", {}, c.into ? link(`#/memory/${encodeURIComponent(c.into)}`, c.into) : "–"))))) : null,
    r.pruned_ids.length ? [h("p", {}, "To prune:"), h("ul", {}, r.pruned_ids.map((id) =>
      h("li", {}, r.applied ? id : link(`#/memory/${encodeURIComponent(id)}`, id))))] : null);
}
