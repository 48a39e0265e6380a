// Foxglove's own client (@foxglove/ws-protocol 0.8.0's FoxgloveClient) driving
// `nerve bridge foxglove` as the Foxglove app's panels do, one mode per capability.
// Payloads are written and read with @foxglove/rosmsg2-serialization (an independent CDR
// codec) against the ros2msg schemas involved. Every message the client sends and every
// one it receives that matters to the mode is kept in a transcript; the last line printed
// is one JSON object: {"transcript": [...], ...results}. Exits 1 on an error or after
// TIMEOUT_MS.
//
// usage: node cockpit.mjs MODE ws://HOST:PORT TIMEOUT_MS [ARGS...]
//   teleop TOPIC [MISMATCH_TOPIC [JSON_TOPIC]]
//                                   Teleop panel: publish geometry_msgs/msg/Twist on TOPIC
//                                   until stdin says "got"; then bytes that do not decode;
//                                   then (if given) a Twist channel on a topic of another
//                                   type; then (if given) a JSON Twist channel on JSON_TOPIC
//                                   until stdin says "got-json"
//   params NODE                     Parameters panel: subscribe, get all, set NODE.speed,
//                                   a set NODE validation refuses, get again
//   service NAME JSON               Service Call panel: call NAME with the request JSON
//   graph TOPIC SERVICE             Topic Graph panel: until TOPIC has a publisher and
//                                   SERVICE a provider
//   vanish TOPIC                    until TOPIC is advertised ("advertised" is printed),
//                                   then until it is unadvertised
//   clock NS                        until the server's time is NS (a /clock sample)
//   bag TOPIC                       playback bar: play, pause, seek, speed up, to the end
//                                   (0.8.0 has no playback calls: sent and read on the raw
//                                   WebSocket as the Foxglove app does)
import wsProtocol from "@foxglove/ws-protocol";
import rosmsg from "@foxglove/rosmsg";
import serialization from "@foxglove/rosmsg2-serialization";
import WebSocket from "ws";
import readline from "node:readline";

const { FoxgloveClient } = wsProtocol;
const { parse } = rosmsg;
const { MessageReader, MessageWriter } = serialization;

const [mode, uri, timeoutArg, ...args] = process.argv.slice(2);
if (!mode || !uri) {
  console.error("usage: node cockpit.mjs MODE ws://HOST:PORT TIMEOUT_MS [ARGS...]");
  process.exit(2);
}
const transcript = [];
// BigInt (uint64 stamps) prints as a string, bytes as a list
const json = (v) =>
  JSON.stringify(v, (_k, x) =>
    typeof x === "bigint" ? x.toString() : x instanceof Uint8Array ? Array.from(x) : x,
  );
const log = (dir, what) => transcript.push({ [dir]: JSON.parse(json(what)) });
const done = (result = {}) => {
  console.log(json({ transcript, ...result }));
  process.exit(0);
};
const fail = (why) => {
  console.error(`foxglove client (${mode}): ${why}`);
  console.error(json({ transcript }));
  process.exit(1);
};
setTimeout(() => fail(`timed out after ${timeoutArg} ms`), Number(timeoutArg)).unref();

const ws = new WebSocket(uri, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
const client = new FoxgloveClient({ ws });
let serverInfo = null;
const statuses = [];
const waiters = [];
// resolves once `pred` holds for some event (checked on every event the client logs)
const until = (pred) =>
  new Promise((resolve) => {
    const check = () => {
      const v = pred();
      if (v) {
        resolve(v);
        return true;
      }
      return false;
    };
    if (!check()) waiters.push(check);
  });
const wake = () => {
  for (let i = waiters.length - 1; i >= 0; i--) if (waiters[i]()) waiters.splice(i, 1);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

client.on("error", (e) => {
  // 0.8.0 does not know the playback state (binary opcode 5): read raw below
  if (mode === "bag" && /Unrecognized server opcode.*: 5$/.test(e?.message ?? "")) return;
  fail(e?.message ?? String(e));
});
client.on("close", (e) => fail(`closed (code ${e?.code})`));
client.on("serverInfo", (info) => {
  serverInfo = info;
  log("received", { op: "serverInfo", capabilities: info.capabilities });
  wake();
});
client.on("status", (s) => {
  statuses.push(s);
  log("received", { op: "status", level: s.level, message: s.message });
  wake();
});
const channels = new Map();
const vanished = [];
client.on("advertise", (cs) => {
  for (const c of cs) channels.set(c.id, c);
  wake();
});
client.on("unadvertise", (ids) => {
  for (const id of ids) {
    const c = channels.get(id);
    if (c) {
      vanished.push(c.topic);
      log("received", { op: "unadvertise", channelIds: [id], topic: c.topic });
    }
  }
  wake();
});
const services = new Map();
client.on("advertiseServices", (ss) => {
  for (const s of ss) services.set(s.name, s);
  wake();
});
const paramEvents = [];
client.on("parameterValues", (e) => {
  paramEvents.push(e);
  log("received", { op: "parameterValues", id: e.id, parameters: e.parameters });
  wake();
});
const graph = { published: new Map(), subscribed: new Map(), services: new Map() };
client.on("connectionGraphUpdate", (u) => {
  log("received", u);
  for (const t of u.publishedTopics ?? []) graph.published.set(t.name, t.publisherIds);
  for (const t of u.subscribedTopics ?? []) graph.subscribed.set(t.name, t.subscriberIds);
  for (const s of u.advertisedServices ?? []) graph.services.set(s.name, s.providerIds);
  for (const n of u.removedTopics ?? []) {
    graph.published.delete(n);
    graph.subscribed.delete(n);
  }
  for (const n of u.removedServices ?? []) graph.services.delete(n);
  wake();
});
const callResponses = [];
client.on("serviceCallResponse", (r) => {
  callResponses.push(r);
  wake();
});
client.on("serviceCallFailure", (f) => {
  log("received", f);
  fail(`service call failed: ${f.message}`);
});
const messages = [];
client.on("message", (m) => {
  messages.push(m);
  wake();
});
const times = [];
client.on("time", (t) => {
  times.push(t.timestamp);
  wake();
});

const TWIST = `geometry_msgs/Vector3 linear
geometry_msgs/Vector3 angular
================================================================================
MSG: geometry_msgs/Vector3
float64 x
float64 y
float64 z
`;

async function teleop([topic, mismatch, jsonTopic]) {
  await until(() => serverInfo);
  if (!serverInfo.capabilities.includes("clientPublish")) fail("no clientPublish capability");
  const channel = {
    topic,
    encoding: "cdr",
    schemaName: "geometry_msgs/msg/Twist",
    schema: TWIST,
    schemaEncoding: "ros2msg",
  };
  const id = client.advertise(channel);
  log("sent", { op: "advertise", channels: [{ id, ...channel, schema: "(Twist ros2msg)" }] });
  const writer = new MessageWriter(parse(TWIST, { ros2: true }));
  const twist = { linear: { x: 0.5, y: 0, z: 0 }, angular: { x: 0, y: 0, z: -0.25 } };
  const data = writer.writeMessage(twist);
  let got = false;
  let gotJson = false;
  readline.createInterface({ input: process.stdin }).on("line", (l) => {
    if (l.trim() === "got") got = true;
    if (l.trim() === "got-json") gotJson = true;
  });
  let sent = 0;
  while (!got) {
    client.sendMessage(id, data);
    if (sent++ === 0) log("sent", { op: "messageData", channelId: id, twist, cdr: data });
    await sleep(100);
  }
  log("sent", { op: "messageData", note: `the same Twist ${sent} times in all` });
  // a CDR header and 3 bytes of the 48 a Twist has
  const bad = new Uint8Array([0, 1, 0, 0, 1, 2, 3]);
  client.sendMessage(id, bad);
  log("sent", { op: "messageData", channelId: id, bytes: bad });
  const malformed = await until(() =>
    statuses.find((s) => s.message.includes(topic) && s.message.includes("does not decode")),
  );
  let refused = null;
  if (mismatch) {
    const m = { ...channel, topic: mismatch };
    const mid = client.advertise(m);
    log("sent", { op: "advertise", channels: [{ id: mid, ...m, schema: "(Twist ros2msg)" }] });
    refused = await until(() =>
      statuses.find((s) => s.message.includes(mismatch) && s.message.includes("has type")),
    );
  }
  let sentJson = 0;
  if (jsonTopic) {
    const j = { ...channel, topic: jsonTopic, encoding: "json" };
    const jid = client.advertise(j);
    log("sent", { op: "advertise", channels: [{ id: jid, ...j, schema: "(Twist ros2msg)" }] });
    const text = new TextEncoder().encode(JSON.stringify(twist));
    while (!gotJson) {
      client.sendMessage(jid, text);
      if (sentJson++ === 0) log("sent", { op: "messageData", channelId: jid, json: twist });
      await sleep(100);
    }
  }
  done({ sent, sentJson, malformed: malformed.message, refused: refused?.message ?? null });
}

async function params([node]) {
  await until(() => serverInfo);
  if (!serverInfo.capabilities.includes("parameters")) fail("no parameters capability");
  const speed = `${node}.speed`;
  const mode_ = `${node}.mode`;
  client.subscribeParameterUpdates([speed, mode_]);
  log("sent", { op: "subscribeParameterUpdates", parameterNames: [speed, mode_] });
  client.getParameters([], "all");
  log("sent", { op: "getParameters", parameterNames: [], id: "all" });
  const all = await until(() => paramEvents.find((e) => e.id === "all"));
  const set = [{ name: speed, value: 2.5 }];
  client.setParameters(set, "set");
  log("sent", { op: "setParameters", parameters: set, id: "set" });
  const setReply = await until(() => paramEvents.find((e) => e.id === "set"));
  // the update pushed to subscribers (no id), from the node's parameter event
  const pushed = await until(() =>
    paramEvents.find(
      (e) => e.id === undefined && e.parameters.some((p) => p.name === speed && p.value === 2.5),
    ),
  );
  const refusedSet = [
    { name: speed, value: 1.5 },
    { name: mode_, value: "fly" },
  ];
  client.setParameters(refusedSet, "refused");
  log("sent", { op: "setParameters", parameters: refusedSet, id: "refused" });
  const refusedReply = await until(() => paramEvents.find((e) => e.id === "refused"));
  const status = await until(() => statuses.find((s) => s.message.includes("not set")));
  client.getParameters([speed, mode_], "after");
  log("sent", { op: "getParameters", parameterNames: [speed, mode_], id: "after" });
  const after = await until(() => paramEvents.find((e) => e.id === "after"));
  const values = (e) => Object.fromEntries(e.parameters.map((p) => [p.name, p.value]));
  done({
    all: values(all),
    set: values(setReply),
    pushed: values(pushed),
    refused: values(refusedReply),
    refusal: status.message,
    after: values(after),
  });
}

async function service([name, request]) {
  await until(() => serverInfo);
  const s = await until(() => services.get(name));
  log("received", {
    op: "advertiseServices",
    services: [{ id: s.id, name: s.name, type: s.type, request: s.request?.schemaName ?? s.requestSchema, response: s.response?.schemaName ?? s.responseSchema }],
  });
  const reqSchema = s.request?.schema ?? s.requestSchema;
  const respSchema = s.response?.schema ?? s.responseSchema;
  const writer = new MessageWriter(parse(reqSchema, { ros2: true }));
  const reader = new MessageReader(parse(respSchema, { ros2: true }));
  const req = JSON.parse(request);
  const data = writer.writeMessage(req);
  client.sendServiceCallRequest({ serviceId: s.id, callId: 1, encoding: "cdr", data });
  log("sent", { op: "serviceCallRequest", serviceId: s.id, callId: 1, encoding: "cdr", request: req });
  const r = await until(() => callResponses.find((c) => c.callId === 1));
  const response = reader.readMessage(
    new Uint8Array(r.data.buffer, r.data.byteOffset, r.data.byteLength),
  );
  log("received", { op: "serviceCallResponse", serviceId: r.serviceId, callId: 1, response });
  done({ type: s.type, request: s.request?.schemaName, response: response });
}

async function graphMode([topic, svc]) {
  await until(() => serverInfo);
  if (!serverInfo.capabilities.includes("connectionGraph")) fail("no connectionGraph capability");
  client.subscribeConnectionGraph();
  log("sent", { op: "subscribeConnectionGraph" });
  await until(
    () => (graph.published.get(topic) ?? []).length > 0 && (graph.services.get(svc) ?? []).length > 0,
  );
  const obj = (m) => Object.fromEntries([...m.entries()].map(([k, v]) => [k, [...v].sort()]));
  done({
    publishedTopics: obj(graph.published),
    subscribedTopics: obj(graph.subscribed),
    advertisedServices: obj(graph.services),
  });
}

async function vanish([topic]) {
  const c = await until(() => [...channels.values()].find((c) => c.topic === topic));
  log("received", { op: "advertise", channels: [{ id: c.id, topic: c.topic, schemaName: c.schemaName }] });
  console.log("advertised");
  await until(() => vanished.includes(topic));
  done({ vanished });
}

// the playback bar, on the raw WebSocket (opcodes of the Foxglove SDK's protocol)
const PLAYBACK_CONTROL = 3; // client binary
const PLAYBACK_STATE = 5; // server binary
const STATUS = ["playing", "paused", "buffering", "ended"];
const states = [];
ws.on("message", (data, isBinary) => {
  // an ArrayBuffer: FoxgloveClient sets binaryType "arraybuffer"
  const b = Buffer.from(data);
  if (!isBinary || b[0] !== PLAYBACK_STATE) return;
  const idLen = b.readUInt32LE(15);
  const state = {
    status: STATUS[b[1]],
    currentTime: b.readBigUInt64LE(2),
    playbackSpeed: b.readFloatLE(10),
    didSeek: b[14] === 1,
    requestId: b.subarray(19, 19 + idLen).toString(),
  };
  states.push(state);
  log("received", { op: "playbackState", ...state });
  wake();
});
let requests = 0;
function control(command, speed, seekTime) {
  const requestId = `r${++requests}`;
  const id = Buffer.from(requestId);
  const b = Buffer.alloc(1 + 1 + 4 + 1 + 8 + 4 + id.length);
  b[0] = PLAYBACK_CONTROL;
  b[1] = command === "play" ? 0 : 1;
  b.writeFloatLE(speed, 2);
  b[6] = seekTime === undefined ? 0 : 1;
  b.writeBigUInt64LE(BigInt(seekTime ?? 0), 7);
  b.writeUInt32LE(id.length, 15);
  id.copy(b, 19);
  ws.send(b);
  log("sent", { op: "playbackControlRequest", command, speed, seekTime, requestId });
  return requestId;
}

async function bag([topic]) {
  await until(() => serverInfo);
  for (const cap of ["playbackControl", "time"]) {
    if (!serverInfo.capabilities.includes(cap)) fail(`no ${cap} capability`);
  }
  const c = await until(() => [...channels.values()].find((c) => c.topic === topic));
  log("received", { op: "advertise", channels: [{ id: c.id, topic, schemaName: c.schemaName }] });
  const reader = new MessageReader(parse(c.schema, { ros2: true }));
  const sub = client.subscribe(c.id);
  log("sent", { op: "subscribe", subscriptions: [{ id: sub, channelId: c.id }] });
  const decode = (m) => ({
    logTime: m.timestamp,
    message: reader.readMessage(new Uint8Array(m.data.buffer, m.data.byteOffset, m.data.byteLength)),
  });
  const reply = (rid) => until(() => states.find((s) => s.requestId === rid));
  const got = [];
  const take = (n) => until(() => messages.length >= n && messages.length);
  // play at speed 1 until 3 messages came
  const play = await reply(control("play", 1.0));
  await take(3);
  got.push(...messages.splice(0).map(decode));
  const timesWhilePlaying = times.splice(0).map(String);
  // pause
  const pause = await reply(control("pause", 1.0));
  // seek (paused) to 1 s after the first message played, then play at speed 4
  const target = BigInt(got[0].logTime) + 1_000_000_000n;
  const seek = await reply(control("pause", 1.0, target));
  await until(() => times.some((t) => t === target));
  messages.splice(0);
  const fast = await reply(control("play", 4.0));
  const ended = await until(() => states.find((s) => s.status === "ended"));
  // the state and the data travel apart: the last message may follow the "ended" state
  await until(() => messages.some((m) => m.timestamp === ended.currentTime));
  const afterSeek = messages.splice(0).map(decode);
  for (const [when, list] of [["before the seek", got], ["after the seek", afterSeek]]) {
    log("received", {
      op: "messageData",
      note: when,
      messages: list.map((g) => `${g.logTime}: ${json(g.message)}`),
    });
  }
  log("received", { op: "time", note: "while playing at speed 1", timestamps: timesWhilePlaying });
  done({
    dataStartTime: serverInfo.dataStartTime ?? null,
    dataEndTime: serverInfo.dataEndTime ?? null,
    play,
    pause,
    seek,
    fast,
    ended,
    beforeSeek: got.map((g) => ({ logTime: String(g.logTime), message: g.message })),
    afterSeek: afterSeek.map((g) => ({ logTime: String(g.logTime), message: g.message })),
    timesWhilePlaying,
  });
}

async function clock([ns]) {
  await until(() => serverInfo);
  if (!serverInfo.capabilities.includes("time")) fail("no time capability");
  const want = BigInt(ns);
  await until(() => times.some((t) => t === want));
  log("received", { op: "time", timestamp: want });
  done({ time: String(want) });
}

const modes = { teleop, params, service, graph: graphMode, vanish, clock, bag };
if (!modes[mode]) fail(`unknown mode ${mode}`);
modes[mode](args).catch((e) => fail(e?.stack ?? String(e)));
