// The panel's only way to data: the HTTP API of this server, with the bearer token from sessionStorage.

const KEY = "engram.token";

export class Unauthorized extends Error {}

export function token() { return sessionStorage.getItem(KEY) || ""; }
export function setToken(t) { t ? sessionStorage.setItem(KEY, t) : sessionStorage.removeItem(KEY); }

export async function call(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (token()) headers["Authorization"] = `Bearer ${token()}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit", cache: "no-store",
  });
  if (resp.status === 401) throw new Unauthorized("the server wants a token");
  const data = await resp.json().catch(() => ({ error: `HTTP ${resp.status}` }));
  if (!resp.ok) throw new Error(data.error || `HTTP ${resp.status}`);
  return data;
}

export const get = (path) => call("GET", path);

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}
