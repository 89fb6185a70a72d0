package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cronix/cronix/config"
)

// configurationDoc renders docs/configuration.md from the flag definitions,
// so the document cannot drift from --help.
func configurationDoc() string {
	var b strings.Builder
	b.WriteString(`# Configuration

Every setting can be given, from lowest to highest precedence, as a key in a YAML file
(` + "`--config FILE`" + ` or ` + "`CRONIX_CONFIG`" + `), a ` + "`CRONIX_*`" + ` environment variable, or a flag.
This page is generated from the binary (` + "`make docs`" + `); ` + "`cronix <command> --help`" + ` prints the same.

Secrets: the admin password of the first start comes only from the environment
(` + "`CRONIX_ADMIN_PASSWORD`" + `); if unset, a random one is printed once. Prefer the environment or
a 0600 YAML file for ` + "`node_token`" + ` over the command line, which other users can read in ` + "`ps`" + `.

Example YAML file for a server:

` + "```yaml" + `
http_addr: 0.0.0.0:8080
advertise_url: http://10.0.0.5:8080
etcd_endpoints: [http://10.0.0.11:2379, http://10.0.0.12:2379, http://10.0.0.13:2379]
db: postgres://cronix:secret@db:5432/cronix?sslmode=require
raft_addr: 10.0.0.5:7946
node_token: change-me
` + "```" + `

`)
	sections := []struct {
		title, summary string
		cfg            any
	}{
		{"cronix standalone", standaloneSummary, ptr(defaultStandalone())},
		{"cronix server", serverSummary, ptr(defaultServer())},
		{"cronix node", nodeSummary, ptr(defaultNode())},
		{"cronix etcd", etcdSummary, ptr(defaultEtcd())},
		{"cronix raft recover", raftRecoverSummary, ptr(defaultRaftRecover())},
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "## `%s`\n\n%s\n\n%s\n", s.title, s.summary, config.Markdown(s.cfg))
	}
	b.WriteString("Environment only: `CRONIX_ADMIN_PASSWORD` — password of the `admin` user created on the first start of a server or standalone.\n\n")
	b.WriteString("The offline tools take plain flags only (no environment variable or YAML key); `--help` lists them: " +
		"`cronix user list|add|passwd` (`--data-dir`, `--db`, `--role`; a new password from `CRONIX_USER_PASSWORD` or stdin, " +
		"see [security.md](security.md)), `cronix plugin verify FILE` and `cronix plugin list` (`--plugin-dir`, `--plugin-checksums`, " +
		"see [plugins.md](plugins.md)).\n")
	return b.String()
}

func ptr[T any](v T) *T { return &v }

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
