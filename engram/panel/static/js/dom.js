// Building DOM nodes from data: text always goes in as text (never parsed as HTML).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function badge(value, extra = "") {
  return h("span", { class: `badge ${value} ${extra}`.trim() }, String(value).replace("_", " "));
}

export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return h("time", { datetime: iso, title: d.toISOString() }, d.toLocaleString());
}

export function ago(iso) {
  if (!iso) return "never";
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

export function num(x, digits = 3) {
  return x === null || x === undefined ? "–" : Number(x).toFixed(digits);
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function link(href, ...children) {
  return h("a", { href }, ...children);
}

export function short(text, n = 160) {
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}
