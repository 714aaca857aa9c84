// The project filter of the task board and the memory pages: all projects, one project, or the
// rows of no project (docs/projects.md). Its choices come from GET /projects.
import { get } from "./api.js";
import { h } from "./dom.js";

// A choice as it sits in the page's hash: "" every project, "global" no project, "p:<id>" one.
export function projectChoice(params) {
  return params.get("project") || "";
}

export async function projectList() {
  return (await get("/projects")).projects;
}

// How a read of the agents' scope (POST /search, GET /tasks) asks for the choice: one project
// is read as an agent working in it reads (its rows and the global ones), "global" as one
// outside any project, "" with all_projects.
export function agentScope(choice) {
  if (choice.startsWith("p:")) return { project: choice.slice(2), all_projects: null };
  return { project: null, all_projects: choice === "" ? true : null };
}

// GET /memories filters exactly: in_project=<id>, or empty for the rows of no project.
export function exactFilter(choice, q) {
  if (choice === "global") q.set("in_project", "");
  else if (choice.startsWith("p:")) q.set("in_project", choice.slice(2));
}

export function projectSelect(projects, choice) {
  const opt = (value, label) => h("option", { value, selected: value === choice }, label);
  return h("label", {}, "Project", h("select", { name: "project" },
    opt("", "all projects"), opt("global", "no project (global)"),
    projects.map((p) => opt(`p:${p.id}`, `${p.id} (${p.memories} memories, ${p.tasks} tasks)`))));
}
