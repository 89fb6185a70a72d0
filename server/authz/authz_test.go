package authz_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/store"
)

var update = flag.Bool("update", false, "rewrite the route table of docs/security.md")

const (
	securityDoc = "../../docs/security.md"
	beginMarker = "<!-- authz:begin -->\n"
	endMarker   = "<!-- authz:end -->"
)

// TestSecurityDoc keeps the route table of docs/security.md equal to authz.Routes.
func TestSecurityDoc(t *testing.T) {
	raw, err := os.ReadFile(securityDoc)
	require.NoError(t, err)
	doc := string(raw)
	i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	require.True(t, i >= 0 && j > i, "docs/security.md needs the authz markers")
	want := authz.Markdown()
	got := doc[i+len(beginMarker) : j]
	if *update {
		doc = doc[:i+len(beginMarker)] + want + doc[j:]
		require.NoError(t, os.WriteFile(securityDoc, []byte(doc), 0o644))
		return
	}
	require.Equal(t, want, got, "docs/security.md is stale: go test ./server/authz -run TestSecurityDoc -update")
}

func TestRoles(t *testing.T) {
	t.Parallel()
	require.True(t, authz.Allows(store.RoleViewer, authz.JobsRead))
	require.False(t, authz.Allows(store.RoleViewer, authz.JobsWrite))
	require.True(t, authz.Allows(store.RoleOperator, authz.JobsRun))
	require.False(t, authz.Allows(store.RoleOperator, authz.Admin))
	require.True(t, authz.Allows(store.RoleAdmin, authz.Admin))
	require.False(t, authz.Allows(store.RoleAdmin, authz.Node), "the node token is not a role")
	require.False(t, authz.Allows("user", authz.JobsRead), "unknown roles may do nothing")
	require.Equal(t, store.RoleViewer, authz.Lower(store.RoleAdmin, store.RoleViewer))
	require.Equal(t, store.RoleOperator, authz.Lower(store.RoleOperator, store.RoleAdmin))
	require.Equal(t, "GET /api/v1/jobs/{id}/runs", authz.Key("GET", "/api/v1/jobs/{id:[0-9]+}/runs"))
	r, ok := authz.Lookup("HEAD", "/healthz")
	require.True(t, ok)
	require.Equal(t, authz.Public, r.Action)
	_, ok = authz.Lookup("GET", "/api/v1/nothing")
	require.False(t, ok)

	var nobody *authz.Principal
	require.NotNil(t, nobody.Scope(), "no principal sees nothing")
	require.Empty(t, nobody.Scope().GroupIDs)
	admin := &authz.Principal{Role: store.RoleAdmin}
	require.Nil(t, admin.Scope(), "admins see everything")
	op := &authz.Principal{Role: store.RoleOperator, Groups: []int64{2}}
	require.True(t, op.InGroup(2))
	require.False(t, op.InGroup(3))
}
