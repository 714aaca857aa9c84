// Strength over time as an inline SVG: the past since the last recall (solid), the projection
// (dashed), the prune threshold and "now". The points come from GET /memories/{id}/strength.
import { h } from "./dom.js";

const NS = "http://www.w3.org/2000/svg";
const W = 760, H = 260, L = 48, R = 16, T = 16, B = 40;

function s(tag, attrs, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

export function strengthChart(curve) {
  const now = new Date(curve.now).getTime();
  const pts = [...curve.past, ...curve.projected].map((p) => [new Date(p.at).getTime(), p.strength]);
  const t0 = Math.min(...pts.map((p) => p[0])), t1 = Math.max(...pts.map((p) => p[0]));
  const ymax = Math.max(curve.importance, curve.prune_threshold * 2, 0.05);
  const x = (t) => L + (W - L - R) * (t1 === t0 ? 0 : (t - t0) / (t1 - t0));
  const y = (v) => T + (H - T - B) * (1 - v / ymax);
  const path = (list) => list.map((p, i) => `${i ? "L" : "M"}${x(new Date(p.at).getTime()).toFixed(1)},${y(p.strength).toFixed(1)}`).join("");
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `Strength ${curve.strength_now.toFixed(3)} now, ${curve.days_until_prune === null ? "pinned" : `prunable in ${curve.days_until_prune} days`}` });
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
             s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of [0, ymax / 2, ymax]) {
    svg.append(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(2)));
  }
  const day = 86400000;
  const span = (t1 - t0) / day;
  const step = span > 400 ? 90 : span > 120 ? 30 : span > 30 ? 7 : 1;
  for (let d = Math.ceil((t0 - now) / day / step) * step; now + d * day <= t1; d += step) {
    const xx = x(now + d * day);
    svg.append(s("line", { class: "axis", x1: xx, y1: H - B, x2: xx, y2: H - B + 4 }),
               s("text", { x: xx, y: H - B + 17, "text-anchor": "middle" }, d === 0 ? "now" : `${d > 0 ? "+" : ""}${d}d`));
  }
  svg.append(s("line", { class: "threshold", x1: L, x2: W - R, y1: y(curve.prune_threshold), y2: y(curve.prune_threshold) }),
             s("text", { x: W - R, y: y(curve.prune_threshold) - 4, "text-anchor": "end" }, `prune below ${curve.prune_threshold}`),
             s("line", { class: "now", x1: x(now), x2: x(now), y1: T, y2: H - B }),
             s("path", { class: "past", d: path(curve.past) }),
             s("text", { x: x(new Date(curve.last_touched_at).getTime()) + 4, y: T + 10 },
               curve.recall_count ? "last recall" : "created"),
             s("path", { class: "projected", d: path(curve.projected) }),
             s("text", { x: L + 4, y: H - 6 }, "days from now · solid: since the last recall · dashed: projected if not recalled"));
  return h("figure", { class: "chart" }, svg);
}
