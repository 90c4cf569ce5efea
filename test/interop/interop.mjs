// Drives shoal-mcp with the official MCP TypeScript SDK client, the way an
// MCP host would: tools, resources, the read envelope, an error, and a
// subscription whose notification carries seq and payload.
//
//   node interop.mjs stdio BINARY STATE_DIR   # starts the facade itself
//   node interop.mjs http URL TOKEN            # a facade already serving HTTP
//                                              # (TOKEN: its state dir's http.token)
//   SHOAL_MCP=BINARY node interop.mjs          # stdio, in a fresh state dir
//
// Exits 0 and prints "interop ok (<transport>)" when every check passed.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import * as z from "zod/v4";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

let [mode, ...rest] = process.argv.slice(2);
let scratch;
if (mode === undefined) {
  // A short path: the kernel's unix socket lives in the state dir.
  scratch = mkdtempSync(join(tmpdir(), "shli"));
  mode = "stdio";
  rest = [process.env.SHOAL_MCP || "shoal-mcp", scratch];
}
let transport;
if (mode === "stdio") {
  const [bin, stateDir] = rest;
  transport = new StdioClientTransport({
    command: bin,
    args: ["--state-dir", stateDir, "--in-process", "--principal", "agent:interop"],
    stderr: "inherit",
  });
} else if (mode === "http") {
  const [url, token] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else {
  console.error("usage: node interop.mjs stdio BINARY STATE_DIR | http URL TOKEN");
  process.exit(2);
}

// The SDK's own schema for resources/updated keeps only uri; Shoal adds
// seq and payload, so the handler uses a loose schema to see them.
const UpdatedSchema = z.object({
  method: z.literal("notifications/resources/updated"),
  params: z.looseObject({ uri: z.string(), seq: z.number(), payload: z.unknown() }),
});

const client = new Client({ name: "shoal-interop", version: "1.0.0" });
const updates = [];
let wake = () => {};
client.setNotificationHandler(UpdatedSchema, (n) => {
  updates.push(n.params);
  wake();
});

function nextUpdate(uri, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no notifications/resources/updated for ${uri}`)), timeoutMs);
    const look = () => {
      const i = updates.findIndex((u) => u.uri === uri);
      if (i >= 0) {
        clearTimeout(timer);
        resolve(updates.splice(i, 1)[0]);
      } else {
        wake = look;
      }
    };
    look();
  });
}

async function main() {
  await client.connect(transport);
  const caps = client.getServerCapabilities();
  assert.equal(caps.resources?.subscribe, true, "resources.subscribe capability");

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const want of ["shoal_exec", "shoal_get", "shoal_plan", "shoal_apply", "shoal_wait", "shoal_pty_open"]) {
    assert.ok(names.includes(want), `tools/list lacks ${want}: ${names}`);
  }
  for (const t of tools) {
    assert.equal(t.outputSchema?.type, "object", `${t.name} has no output schema`);
  }

  // The SDK checks structuredContent against each tool's output schema.
  const exec = await client.callTool({ name: "shoal_exec", arguments: { source: `printf '{"name":"shoal","n":[1,2,3]}' | from json` } });
  assert.ok(!exec.isError, `shoal_exec failed: ${JSON.stringify(exec.content)}`);
  const { ref, uri, ok, exit } = exec.structuredContent;
  assert.match(ref, /^out:\d+$/);
  assert.equal(ok, true);
  assert.equal(exit, 0);

  const got = await client.callTool({ name: "shoal_get", arguments: { target: ref, path: ".n", slice: "1..3" } });
  assert.deepEqual(got.structuredContent.value, [2, 3]);

  const refused = await client.callTool({ name: "shoal_get", arguments: { target: ref, path: ".missing" } });
  assert.equal(refused.isError, true);
  assert.match(refused.content[0].text, /BAD_PATH/);

  const { resources } = await client.listResources();
  assert.deepEqual(resources.slice(0, 6).map((r) => r.uri), [
    "shoal://session/cwd", "shoal://session/env", "shoal://session/reef",
    "shoal://jobs", "shoal://journal", "shoal://pty",
  ]);
  const { resourceTemplates } = await client.listResourceTemplates();
  assert.ok(resourceTemplates.length >= 9, `${resourceTemplates.length} templates`);
  assert.equal(resourceTemplates[0].uriTemplate, "shoal://out/{n}{?path,slice,grep,context,format}");

  // The read envelope: contents plus structuredContent, which the SDK keeps.
  const read = await client.readResource({ uri: `${uri}?path=.name` });
  assert.equal(read.contents[0].mimeType, "application/json");
  assert.deepEqual(read.structuredContent, { $: "str", v: "shoal" });
  const rendered = await client.readResource({ uri: `${uri}?path=.name&format=render` });
  assert.equal(rendered.contents[0].mimeType, "text/plain");
  assert.equal(rendered.structuredContent.ref, ref);

  await assert.rejects(client.readResource({ uri: `${uri}?path=.missing` }), /kernel error: BAD_PATH/);

  // A subscription: emit from the shell, receive seq and payload.
  const channel = "shoal://events/user.interop";
  await client.subscribeResource({ uri: channel });
  const emitted = await client.callTool({ name: "shoal_exec", arguments: { source: `emit user.interop '{"n":1}'` } });
  assert.ok(!emitted.isError, JSON.stringify(emitted.content));
  const up = await nextUpdate(channel);
  assert.equal(typeof up.seq, "number");
  assert.deepEqual(up.payload, { n: 1 });
  // _meta mirrors them, for code that sees only the SDK's typed params.
  assert.equal(up._meta?.["sh.shoal/seq"], up.seq);
  assert.deepEqual(up._meta?.["sh.shoal/payload"], { n: 1 });

  // What a model reads: compact structuredContent, with a search that does not re-run.
  const big = await client.callTool({ name: "shoal_exec", arguments: { source: "seq 1 50000" } });
  assert.ok(JSON.stringify(big.structuredContent).length <= big.content[0].text.length);
  assert.match(big.structuredContent.next, /shoal_get/);
  const found = await client.callTool({ name: "shoal_get", arguments: { target: big.structuredContent.ref, path: ".stdout", grep: "^49999$" } });
  assert.equal(found.structuredContent.value.total, 1);
  const tail = await client.callTool({ name: "shoal_get", arguments: { target: big.structuredContent.ref, path: ".stdout", slice: "-6.." } });
  assert.equal(tail.structuredContent.value, "50000\n");
  await client.unsubscribeResource({ uri: channel });

  await client.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  console.log(`interop ok (${mode})`);
}

main().catch(async (err) => {
  console.error(`interop FAILED (${mode}):`, err);
  try {
    await client.close();
  } catch {}
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  process.exit(1);
});
