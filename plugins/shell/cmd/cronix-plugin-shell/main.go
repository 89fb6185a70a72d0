// Command cronix-plugin-shell is the shell handler as a standalone Cronix
// plugin binary. A cronix node starts it; it is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/plugins/shell"
)

func main() {
	if err := pluginapi.Serve(shell.New()); err != nil {
		fmt.Fprintln(os.Stderr, "cronix-plugin-shell:", err)
		os.Exit(1)
	}
}
