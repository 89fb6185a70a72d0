// Command cronix is the Cronix distributed job scheduler: one binary for the
// server replicas, the node agents, a zero-config standalone mode and the
// built-in handler plugins.
//
//	cronix standalone   embedded etcd + SQLite + one server + one node (make run)
//	cronix server       a server replica (API, UI, raft, trigger leader)
//	cronix node         a node agent that runs jobs through handler plugins
//	cronix etcd         a single-member embedded etcd (development, make run-ha)
//	cronix raft recover rewrite a stopped replica's raft membership after a lost quorum
//	cronix plugin NAME  serve a built-in handler plugin (started by the node)
//	cronix plugin verify FILE, cronix plugin list --plugin-dir DIR
//	                    check a plugin binary; list a plugin dir as a node would load it
//	cronix user         list, add users or reset a password in the database (break-glass)
//	cronix version      print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cronix/cronix/buildinfo"
)

const usageText = `Cronix — distributed job scheduler.

Usage: cronix <command> [flags]

Commands:
  standalone   run everything in one process: embedded etcd, SQLite, one server, one node
  server       run a server replica (REST API, web admin, raft trigger leader)
  node         run a node agent that executes jobs through handler plugins
  etcd         run a single-member embedded etcd (development and make run-ha only)
  raft recover rewrite a stopped replica's raft membership after a lost quorum
  plugin NAME  serve a built-in handler plugin (the node starts these itself)
  plugin verify FILE          check a plugin binary: handshake, handlers, schema; print its checksum entry
  plugin list --plugin-dir DIR  every plugin in DIR and whether a node would load it
  user list|add|passwd   manage users in the database of a stopped server (break-glass)
  version      print the version
  docs configuration   print the configuration reference (Markdown)

Run 'cronix <command> --help' for the flags of a command. Every flag can also be
set by a CRONIX_* environment variable or a key in a YAML file given by --config.
`

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first SIGINT/SIGTERM starts a graceful stop; from then on the
	// signals have their default effect again, so a second one ends the
	// process at once instead of waiting for the stop to finish.
	context.AfterFunc(ctx, stop)
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "standalone":
		err = runStandalone(ctx, rest, getenv, stdout, stderr)
	case "server":
		err = runServer(ctx, rest, getenv, stdout, stderr)
	case "node":
		err = runNode(ctx, rest, getenv, stdout, stderr)
	case "raft":
		err = runRaft(ctx, rest, getenv, stdout, stderr)
	case "etcd":
		err = runEtcd(ctx, rest, getenv, stdout, stderr)
	case "plugin":
		err = runPlugin(ctx, rest, stdout, stderr)
	case "user":
		err = runUser(ctx, rest, getenv, os.Stdin, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "cronix", buildinfo.String())
	case "docs":
		err = runDocs(rest, stdout)
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usageText)
	default:
		fmt.Fprintf(stderr, "cronix: unknown command %q\n\n%s", cmd, usageText)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(stderr, "cronix %s: %v\n", cmd, err)
		return 1
	}
}
