package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/pluginhost"
	"github.com/cronix/cronix/server/handlers"
)

// pluginCheckOptions bound how long "cronix plugin verify|list" wait for a
// plugin: a binary that is not a plugin fails within a few seconds.
var pluginCheckOptions = pluginhost.Options{StartTimeout: 4 * time.Second, DescribeTimeout: 3 * time.Second,
	ValidateTimeout: 3 * time.Second}

// runPluginVerify is "cronix plugin verify FILE": it starts FILE as a node
// would (go-plugin handshake, protocol negotiation), asks for its handler's
// Info, compiles the params schema like the servers do, and prints the
// --plugin-checksums entry that pins it.
func runPluginVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cronix plugin verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: cronix plugin verify [--start-timeout D] FILE\n\n"+
			"Starts the plugin binary FILE like a node does, checks its handshake, handler info and params\n"+
			"schema, and prints the checksum entry to add to the node's --plugin-checksums.")
		fs.PrintDefaults()
	}
	startTimeout := fs.Duration("start-timeout", pluginCheckOptions.StartTimeout, "how long the plugin may take to print its handshake line (raise it for slow runtimes such as Node.js)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := pluginCheckOptions
	opts.StartTimeout = *startTimeout
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("usage: cronix plugin verify FILE")
	}
	file, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("plugin verify: %w", err)
	}
	sum, err := fileSHA256(file)
	if err != nil {
		return fmt.Errorf("plugin verify: reading %s: %w", file, err)
	}
	name := strings.TrimPrefix(filepath.Base(file), pluginhost.DirPrefix)
	h := pluginhost.New(nil, []pluginhost.Spec{{Name: name, Cmd: []string{file}, SHA256: sum}}, opts)
	if err := h.Start(ctx); err != nil {
		return fmt.Errorf("plugin verify: %w", err)
	}
	defer h.Stop()
	st := h.Status()[0]
	if st.State != cluster.PluginLoaded {
		return fmt.Errorf("plugin verify: %s is not a usable Cronix plugin (%s): %s", file, st.Reason, st.Message)
	}
	infos := h.Infos()
	if len(infos) != 1 {
		return fmt.Errorf("plugin verify: %s serves %d handlers, want 1", file, len(infos))
	}
	info := infos[0]
	fmt.Fprintf(stdout, "plugin    %s\n", file)
	fmt.Fprintf(stdout, "protocol  %d\n", st.Protocol)
	fmt.Fprintf(stdout, "handler   %s %s", info.Name, info.Version)
	if info.Description != "" {
		fmt.Fprintf(stdout, ": %s", info.Description)
	}
	fmt.Fprintln(stdout)
	if len(info.ParamsSchema) == 0 {
		fmt.Fprintln(stdout, "schema    none (the servers accept any params object)")
	} else if _, err := handlers.Compile(info.ParamsSchema); err != nil {
		return fmt.Errorf("plugin verify: handler %q has an invalid params schema: %w", info.Name, err)
	} else {
		fmt.Fprintln(stdout, "schema    ok")
	}
	fmt.Fprintf(stdout, "checksum  %s=%s\n", info.Name, sum)
	if want := pluginhost.DirPrefix + info.Name; filepath.Base(file) != want {
		fmt.Fprintf(stdout, "note      install it as %s: a plugin-dir binary serves only the handler its file name and checksum entry name\n", want)
	}
	return nil
}

// runPluginList is "cronix plugin list --plugin-dir DIR": every
// cronix-plugin-* binary in DIR, started as a node would start it, with
// its handler and state. With --plugin-checksums it applies them exactly
// like a node; without, it pins each binary to its current checksum and
// prints that.
func runPluginList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cronix plugin list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("plugin-dir", "", "directory of plugin binaries (cronix-plugin-*)")
	sumsFlag := fs.String("plugin-checksums", "", "comma-separated name=sha256 entries to check, as given to the node (default: each binary's current checksum)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: cronix plugin list --plugin-dir DIR [--plugin-checksums name=sha256,...]\n\n"+
			"Starts every plugin binary in DIR like a node does and lists its handler, protocol, state and checksum.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("usage: cronix plugin list --plugin-dir DIR")
	}
	var sums map[string]string
	if *sumsFlag != "" {
		var err error
		if sums, err = pluginhost.ParseChecksums(strings.Split(*sumsFlag, ",")); err != nil {
			return fmt.Errorf("plugin list: --plugin-checksums: %w", err)
		}
	} else {
		all, err := pluginhost.DirSpecs(nil, *dir, nil)
		if err != nil {
			return fmt.Errorf("plugin list: %w", err)
		}
		sums = map[string]string{}
		for _, sp := range all {
			if sum, err := fileSHA256(sp.Cmd[0]); err == nil {
				sums[sp.Name] = sum
			}
		}
	}
	specs, err := pluginhost.DirSpecs(nil, *dir, sums)
	if err != nil {
		return fmt.Errorf("plugin list: %w", err)
	}
	h := pluginhost.New(nil, specs, pluginCheckOptions)
	if err := h.Start(ctx); err != nil {
		return fmt.Errorf("plugin list: %w", err)
	}
	defer h.Stop()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHANDLER\tVERSION\tPROTOCOL\tSTATE\tSHA256\tREASON")
	for _, st := range h.Status() {
		sum, _ := fileSHA256(st.Path)
		proto := "-"
		if st.Protocol > 0 {
			proto = fmt.Sprint(st.Protocol)
		}
		reason := st.Reason
		if st.Message != "" {
			reason += ": " + st.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", st.Name, dash(st.Handler), dash(st.Version), proto, st.State, sum, dash(reason))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
