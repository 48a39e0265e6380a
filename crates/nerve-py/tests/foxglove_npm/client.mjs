// Foxglove's own client (@foxglove/ws-protocol's FoxgloveClient, which offers the
// subprotocol "foxglove.websocket.v1") against `nerve bridge foxglove`: waits for the
// server's info and the advertisement of TOPIC, subscribes, takes COUNT messages and
// decodes each with @foxglove/rosmsg2-serialization (an independent CDR decoder) against
// the advertised ros2msg schema. Prints one JSON line: the negotiated subprotocol, the
// server's name, the channel and the decoded messages. Exits 1 on an error or after
// TIMEOUT_MS.
//
// usage: node client.mjs ws://HOST:PORT TOPIC [COUNT] [TIMEOUT_MS]
// the @foxglove packages are CommonJS: take their exports from the default export
import wsProtocol from "@foxglove/ws-protocol";
import rosmsg from "@foxglove/rosmsg";
import serialization from "@foxglove/rosmsg2-serialization";
import WebSocket from "ws";

const { FoxgloveClient } = wsProtocol;
const { parse } = rosmsg;
const { MessageReader } = serialization;

const [uri, topic, countArg = "1", timeoutArg = "20000"] = process.argv.slice(2);
if (!uri || !topic) {
  console.error("usage: node client.mjs ws://HOST:PORT TOPIC [COUNT] [TIMEOUT_MS]");
  process.exit(2);
}
const count = Number(countArg);
const fail = (why) => {
  console.error(`foxglove client: ${why}`);
  process.exit(1);
};
setTimeout(() => fail(`timed out after ${timeoutArg} ms`), Number(timeoutArg)).unref();

const ws = new WebSocket(uri, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
const client = new FoxgloveClient({ ws });
const result = { subprotocol: null, server: null, channel: null, messages: [] };
let reader = null;
let subscription = null;

// BigInt (uint64 stamps) prints as a string
const json = (v) => JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? x.toString() : x));

client.on("error", (e) => fail(e?.message ?? String(e)));
client.on("open", () => {
  result.subprotocol = ws.protocol;
});
client.on("serverInfo", (info) => {
  result.server = info.name;
});
client.on("advertise", (channels) => {
  const channel = channels.find((c) => c.topic === topic);
  if (!channel || subscription !== null) return;
  if (channel.encoding !== "cdr" || channel.schemaEncoding !== "ros2msg") {
    fail(`${topic} advertised as ${channel.encoding}/${channel.schemaEncoding}`);
  }
  reader = new MessageReader(parse(channel.schema, { ros2: true }));
  result.channel = { topic: channel.topic, schemaName: channel.schemaName };
  subscription = client.subscribe(channel.id);
});
client.on("message", ({ subscriptionId, data }) => {
  if (subscriptionId !== subscription) return;
  result.messages.push(reader.readMessage(data));
  if (result.messages.length >= count) {
    client.unsubscribe(subscription);
    console.log(json(result));
    client.close();
    process.exit(0);
  }
});
client.on("close", (e) => fail(`closed before ${count} message(s) (code ${e?.code})`));
