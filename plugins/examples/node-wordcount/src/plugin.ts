// cronix-plugin-wordcount: a Cronix handler plugin in TypeScript on Node.js.
//
// It speaks the published protocol (pluginapi/proto/v2/handler.proto) with
// @grpc/grpc-js, through HashiCorp go-plugin's handshake, with no Go code:
//
//  1. The node starts it with CRONIX_PLUGIN=<cookie> and
//     PLUGIN_PROTOCOL_VERSIONS (e.g. "1,2") in the environment.
//  2. It serves cronix.pluginapi.v2.Handler and grpc.health.v1.Health
//     (service "plugin" SERVING) on 127.0.0.1, then prints the handshake
//     line "1|2|tcp|127.0.0.1:PORT|grpc" on stdout.
//  3. The node calls Describe, Validate and Run; Run's deadline is the job
//     timeout and its cancellation a kill.
//
// The "wordcount" handler counts the words of params.text.
import * as path from "path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import * as protobuf from "protobufjs";

const COOKIE_KEY = "CRONIX_PLUGIN";
const COOKIE_VALUE = "7c1d5e0a-cronix-handler";
const PROTOCOL_VERSION = 2;
const CORE_PROTOCOL_VERSION = 1; // go-plugin's own

// The published contract, read from the repository (override with
// CRONIX_PLUGIN_PROTO when the plugin is installed elsewhere).
const protoFile =
  process.env.CRONIX_PLUGIN_PROTO ??
  path.resolve(__dirname, "../../../../pluginapi/proto/v2/handler.proto");
const healthFile = path.resolve(__dirname, "../health.proto");

const loadOptions: protoLoader.Options = { keepCase: true, longs: Number, enums: String, defaults: true };
const handlerDef = protoLoader.loadSync(protoFile, loadOptions);
const healthDef = protoLoader.loadSync(healthFile, loadOptions);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const handlerPkg = grpc.loadPackageDefinition(handlerDef) as any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const healthPkg = grpc.loadPackageDefinition(healthDef) as any;

// For error details: cronix.pluginapi.v2.Error inside a google.rpc.Status.
const root = protobuf.loadSync(protoFile);
const ErrorType = root.lookupType("cronix.pluginapi.v2.Error");
const rpcStatus = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: { nested: { Any: { fields: { type_url: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } } } },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: "int32", id: 1 },
                message: { type: "string", id: 2 },
                details: { rule: "repeated", type: "google.protobuf.Any", id: 3 },
              },
            },
          },
        },
      },
    },
  },
}).lookupType("google.rpc.Status");

const paramsSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  title: "Word count",
  type: "object",
  properties: { text: { type: "string", title: "Text", minLength: 1 } },
  required: ["text"],
  additionalProperties: false,
};

// invalidParams is a handler error naming a params field, as a gRPC status
// whose details carry the protocol's Error (kind INVALID_PARAMS).
function invalidParams(field: string, message: string): grpc.ServiceError {
  const detail = ErrorType.encode(ErrorType.create({ kind: 3, message, field })).finish();
  const st = rpcStatus.encode(
    rpcStatus.create({
      code: grpc.status.INVALID_ARGUMENT,
      message: `${field}: ${message}`,
      details: [{ type_url: "type.googleapis.com/cronix.pluginapi.v2.Error", value: detail }],
    }),
  ).finish();
  const metadata = new grpc.Metadata();
  metadata.set("grpc-status-details-bin", Buffer.from(st));
  return Object.assign(new Error(`${field}: ${message}`), {
    code: grpc.status.INVALID_ARGUMENT,
    details: `${field}: ${message}`,
    metadata,
  });
}

function parseParams(raw: Buffer): { text: string } | grpc.ServiceError {
  let p: unknown;
  try {
    p = JSON.parse(raw.length ? raw.toString("utf8") : "{}");
  } catch (e) {
    return invalidParams("text", `params are not JSON: ${(e as Error).message}`);
  }
  const text = (p as { text?: unknown }).text;
  if (typeof text !== "string" || text.length === 0) {
    return invalidParams("text", "required, a non-empty string");
  }
  return { text };
}

const handler = {
  Describe(_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) {
    cb(null, {
      name: "wordcount",
      version: "1.0.0",
      description: "Counts the words of a text (a TypeScript plugin on Node.js).",
      params_schema: Buffer.from(JSON.stringify(paramsSchema)),
      sdk: `node/grpc-js ${process.version}`,
    });
  },
  Validate(call: grpc.ServerUnaryCall<{ params: Buffer }, unknown>, cb: grpc.sendUnaryData<unknown>) {
    const p = parseParams(call.request.params);
    if ("code" in p) {
      cb(p);
      return;
    }
    cb(null, {});
  },
  Run(call: grpc.ServerWritableStream<{ params: Buffer; fire_id: string; attempt: number }, unknown>) {
    const p = parseParams(call.request.params);
    if ("code" in p) {
      // Inside Run, a handler error travels in the result.
      call.write({ result: { status: "failed", exit_code: -1, message: p.details, error: { kind: "ERROR_KIND_INVALID_PARAMS", field: "text", message: p.details } } });
      call.end();
      return;
    }
    const words = p.text.split(/\s+/).filter((w) => w.length > 0).length;
    call.write({ output: Buffer.from(`fire ${call.request.fire_id} attempt ${call.request.attempt}\n`) });
    call.write({ output: Buffer.from(`words: ${words}\n`) });
    call.write({ result: { status: "success", exit_code: 0, message: `${words} words` } });
    call.end();
  },
};

const health = {
  Check(call: grpc.ServerUnaryCall<{ service: string }, unknown>, cb: grpc.sendUnaryData<unknown>) {
    cb(null, { status: "SERVING" });
  },
};

function main(): void {
  if (process.env[COOKIE_KEY] !== COOKIE_VALUE) {
    process.stderr.write("cronix-plugin-wordcount: this is a Cronix handler plugin; a cronix node starts it\n");
    process.exit(1);
  }
  const offered = (process.env.PLUGIN_PROTOCOL_VERSIONS ?? String(PROTOCOL_VERSION)).split(",").map(Number);
  if (!offered.includes(PROTOCOL_VERSION)) {
    process.stderr.write(`cronix-plugin-wordcount: the node offers protocol versions ${offered}, this plugin speaks ${PROTOCOL_VERSION}\n`);
    process.exit(1);
  }
  const server = new grpc.Server();
  server.addService(handlerPkg.cronix.pluginapi.v2.Handler.service, handler);
  server.addService(healthPkg.grpc.health.v1.Health.service, health);
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      process.stderr.write(`cronix-plugin-wordcount: listen: ${err.message}\n`);
      process.exit(1);
    }
    process.stdout.write(`${CORE_PROTOCOL_VERSION}|${PROTOCOL_VERSION}|tcp|127.0.0.1:${port}|grpc\n`);
  });
  const stop = () => server.tryShutdown(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main();
