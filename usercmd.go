package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/store"
)

const userUsage = `Usage: cronix user <command> [flags] [NAME]

Break-glass user management straight in the database, for a stopped server
(e.g. a forgotten admin password):

  list                     list users: id, name, role, groups, disabled
  add [--role R] NAME      add a user (role admin, operator or viewer; default viewer)
  passwd NAME              set a user's password and end its sessions

The password of add and passwd comes from CRONIX_USER_PASSWORD, else from the
first line of standard input. Every change is written to the audit log.

Flags:
`

// runUser is "cronix user": users in the database of a data dir or DSN.
func runUser(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, userUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return errors.New("a command is required: list, add or passwd")
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("user "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "./data", "data directory of a standalone instance or server (its cronix.db)")
	dsn := fs.String("db", "", "database DSN instead of --data-dir (sqlite:///path.db, postgres://..., mysql://...)")
	role := fs.String("role", store.RoleViewer, "role of a new user: admin, operator or viewer")
	fs.Usage = func() { fmt.Fprint(stderr, userUsage); fs.PrintDefaults() }
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if *dsn == "" {
		*dsn = "sqlite://" + filepath.Join(*dataDir, "cronix.db")
	}
	st, err := store.Open(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("open the database: %w", err)
	}
	defer st.Close()
	name := strings.TrimSpace(fs.Arg(0))
	switch sub {
	case "list":
		return listUsers(ctx, st, stdout)
	case "add", "passwd":
		if name == "" || fs.NArg() != 1 {
			return fmt.Errorf("user %s needs exactly one user NAME", sub)
		}
		pw, err := readPassword(getenv, stdin)
		if err != nil {
			return err
		}
		if msg := auth.ValidatePassword(name, pw); msg != "" {
			return errors.New(msg)
		}
		hash, err := auth.HashPassword(pw)
		if err != nil {
			return err
		}
		if sub == "add" {
			if !authz.ValidRole(*role) {
				return fmt.Errorf("--role must be one of %s", strings.Join(authz.Roles, ", "))
			}
			u := &store.User{Username: name, PasswordHash: hash, Role: *role}
			if err := st.CreateUser(ctx, u); err != nil {
				return fmt.Errorf("add user %q: %w", name, err)
			}
			audit(ctx, st, "create", u.ID)
			fmt.Fprintf(stdout, "added user %s (id %d, role %s)\n", u.Username, u.ID, u.Role)
			return nil
		}
		u, err := st.UserByName(ctx, name)
		if err != nil {
			return fmt.Errorf("user %q: %w", name, err)
		}
		if _, _, err := st.UpdateUser(ctx, u.ID, store.UserChange{PasswordHash: &hash}); err != nil {
			return fmt.Errorf("set the password of %q: %w", name, err)
		}
		audit(ctx, st, "password", u.ID)
		fmt.Fprintf(stdout, "password of %s set; its sessions ended\n", name)
		return nil
	}
	fs.Usage()
	return fmt.Errorf("unknown user command %q (list, add or passwd)", sub)
}

// audit records a command-line change; a failure does not undo it.
func audit(ctx context.Context, st *store.Store, action string, userID int64) {
	_ = st.InsertAudit(ctx, &store.AuditEntry{Username: "(cronix user)", Address: "local", Action: action,
		ObjectType: "user", ObjectID: strconv.FormatInt(userID, 10)})
}

// readPassword takes CRONIX_USER_PASSWORD or the first line of stdin.
func readPassword(getenv func(string) string, stdin io.Reader) (string, error) {
	if pw := getenv("CRONIX_USER_PASSWORD"); pw != "" {
		return pw, nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password from stdin: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", errors.New("no password: set CRONIX_USER_PASSWORD or write it to stdin")
	}
	return pw, nil
}

func listUsers(ctx context.Context, st *store.Store, w io.Writer) error {
	users, _, err := st.ListUsers(ctx, store.Page{})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tGROUPS\tDISABLED")
	for _, u := range users {
		groups := make([]string, len(u.Groups))
		for i, g := range u.Groups {
			groups[i] = strconv.FormatInt(g, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%t\n", u.ID, u.Username, u.Role, strings.Join(groups, ","), u.Disabled)
	}
	return tw.Flush()
}
