// Package pluginapi is the SDK for Cronix job handlers. It is the only
// package a handler author imports: it depends on nothing else in Cronix.
//
// A handler implements Handler and serves it from its binary's main:
//
//	func main() { pluginapi.Main(myhandler.New()) }
//
// (Main is Serve, plus the error on stderr and exit status 1 when the binary
// was not started by a node.) Plugin authors depend on the root module at a
// release tag, with no replace directive: go get github.com/cronix/cronix@v1.0.0
// (SDK 1.0); docs/plugins.md and plugins/example are the walk-through and
// the template.
//
// A Cronix node starts the binary as a go-plugin process (gRPC over a local
// socket), checks its SHA-256 when configured, calls Info once to learn the
// handler's name, version and params schema, then calls Validate when a job
// is saved and Run for every fire of a job, many Runs concurrently on one
// process. Package plugintest runs a handler over real gRPC in-process and
// checks the contract below.
//
// Inside a plugin, stdout belongs to the handshake: log with Logger (JSON
// lines on stderr that the node relogs under the plugin's name), and start
// child processes with ProcessEnv so they do not inherit the handshake
// variables.
//
// # What the SDK guarantees
//
//   - Protocol: go-plugin, gRPC only, handshake Handshake (magic cookie
//     CRONIX_PLUGIN). The contract is the published proto of each version
//     (pluginapi/proto/v2/handler.proto, current; pluginapi/proto/v1, frozen;
//     history in pluginapi/proto/CHANGELOG.md). Hosts and plugins built with
//     this SDK speak ProtocolVersion and PreviousProtocolVersion side by side
//     (VersionedPlugins); go-plugin picks the highest common one. A change
//     that breaks the wire adds a version; within a version the wire only
//     grows.
//   - Deadline and kill: Run's ctx carries the job timeout as its deadline
//     (it travels as the gRPC deadline) and is cancelled when the run is
//     killed or the host goes away. The handler must then stop promptly and
//     stop every process it started; the node does not wait for it.
//   - Output: bytes written to Run's out reach the node in order, in
//     chunks of at most 32 KiB. A write goes out at once (so what a handler
//     wrote before its process crashed has normally left it and is kept in
//     the run's output), except that beyond 16 sends in 50 ms writes are
//     batched and sent at the latest 50 ms after being written. The writer is safe for concurrent use and blocks when the
//     node reads slower than the handler writes, so memory stays bounded. If
//     the node is gone, writes are dropped without error. Writing after Run
//     returned fails.
//   - Start time: a run the node hands over ahead of its time carries
//     Request.StartAt; the SDK calls Run only then (a cancel meanwhile ends
//     the run without calling it). A handler that implements EarlyRunner
//     (SDK 1.2) and says so is called at once instead, and keeps that
//     promise itself: nothing visible before StartAt, nothing at all when
//     ctx ends first. The http handler uses it to have its requests
//     serialised and its connections dialled before the second.
//   - Result: every Run ends with exactly one Result on the wire, also when
//     the handler returns an error or panics (a panic in the calling
//     goroutine becomes a failed Result with a Permanent error; a panic in a
//     goroutine the handler started crashes the plugin process, which fails
//     its in-flight runs and is restarted by the node).
//   - Errors: the kind of an error a handler returns survives the process
//     boundary. Build them with Retryable (running again later may work),
//     Permanent (it will not), and InvalidParams (a named params field is
//     wrong); test them with IsRetryable, IsPermanent and AsInvalidParams.
//     Other errors arrive as plain errors with the same message.
//   - Run's error vs. Result: a nil error means Result is the job's outcome
//     (StatusSuccess, or StatusFailed with an exit code and message). A
//     non-nil error means the handler could not run the job as asked; its
//     kind tells the node whether retrying can help.
//
// On the host side, Dispense returns a Handler for a started plugin whose
// calls are bounded by the plugin's lifetime: when the process dies, calls
// in flight and later ones fail with a PluginExitedError
// (errors.Is(err, ErrPluginExited)). When the caller's ctx ends first, Run
// returns an error wrapping ctx's error and a failed Result whose Message
// is "timeout" (deadline) or "killed" (cancellation). Right at a deadline
// the handler's own answer may arrive first (the plugin's copy of the
// deadline can fire a moment earlier); when that answer is a failure, Run
// returns it with an error wrapping context.DeadlineExceeded, so a caller
// tells a timeout by errors.Is alone. A handler's ctx reports context.DeadlineExceeded at the
// deadline, not context.Canceled.
//
// Runs travel on one stream per plugin connection (the Runs RPC, SDK 1.3)
// once Info found that the plugin serves it, as every plugin built with
// this SDK does: starts and cancels go to the plugin, output and results
// come back, many runs to a message. Each run keeps the guarantees above;
// only the cost per run falls. Plugins that do not serve Runs (older ones,
// other languages) get a Run stream per run. On the shared stream the
// host's out writers are called by one receiver, so they must not block.
//
// # What it does not guarantee
//
// It does not retry, cap output or enforce the timeout on a handler that
// ignores ctx: the node does those. Plugin processes are not sandboxed.
package pluginapi
