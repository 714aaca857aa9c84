// The TypeScript MCP SDK's client against `python -m engram` over stdio: lists and reads the
// resume prompt and the task resources, and prints what it got as one JSON line for
// tests/e2e/test_mcp_ts_client.py to check. Usage: node mcp_ts_client.mjs SDK_DIR PYTHON TASK_ID
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, python, taskId] = process.argv.slice(2);
const esm = (p) => pathToFileURL(path.join(sdkDir, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href;
const { Client } = await import(esm("client/index.js"));
const { StdioClientTransport } = await import(esm("client/stdio.js"));

const transport = new StdioClientTransport({ command: python, args: ["-m", "engram"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "engram-ts-test", version: "1.0.0" });
await client.connect(transport);
const out = { server: client.getServerVersion() };
out.prompts = (await client.listPrompts()).prompts;
out.resources = (await client.listResources()).resources;
out.templates = (await client.listResourceTemplates()).resourceTemplates;
out.tasks = (await client.readResource({ uri: "engram://tasks" })).contents;
out.resume = (await client.readResource({ uri: `engram://tasks/${taskId}/resume` })).contents;
// Read before the prompt, which claims the task (and so changes the block's Held by line).
out.tool = await client.callTool({ name: "resume_task", arguments: { task_id: taskId, claim: false } });
out.prompt = await client.getPrompt({ name: "resume", arguments: { task_id: taskId } });
try {
  await client.readResource({ uri: "engram://tasks/t-missing/resume" });
  out.missing = null;
} catch (e) {
  out.missing = String(e.message);
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
