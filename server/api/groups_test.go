package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
)

// TestGroupChangesSayWhyTheyAreRefused: deleting or renaming a group that
// jobs use, or taking another group's appname, is a 409 that names the
// actual conflict; a group that does not exist is a 404.
func TestGroupChangesSayWhyTheyAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var alpha, beta api.Group
	b.doJSON(http.MethodPost, "/api/v1/groups", b.token, map[string]any{"appname": "alpha"}, http.StatusCreated, &alpha)
	b.doJSON(http.MethodPost, "/api/v1/groups", b.token, map[string]any{"appname": "beta"}, http.StatusCreated, &beta)
	for i := range 3 {
		j := validJob()
		j["name"], j["group"] = fmt.Sprintf("job%d", i), "alpha"
		b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusCreated, nil)
	}
	alphaPath := fmt.Sprintf("/api/v1/groups/%d", alpha.ID)

	e := b.errorOf(http.MethodDelete, alphaPath, b.token, nil, http.StatusConflict)
	require.Equal(t, fmt.Sprintf("group %d (alpha) has 3 jobs: it cannot be deleted while jobs use it (move or delete them first)",
		alpha.ID), e.Error)
	e = b.errorOf(http.MethodPut, alphaPath, b.token, map[string]any{"appname": "alpha2"}, http.StatusConflict)
	require.Equal(t, fmt.Sprintf("group %d (alpha) has 3 jobs: it cannot be renamed while jobs use it (move or delete them first)",
		alpha.ID), e.Error)
	e = b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/groups/%d", beta.ID), b.token, map[string]any{"appname": "alpha"},
		http.StatusConflict)
	require.Equal(t, fmt.Sprintf("appname %q is taken by group %d", "alpha", alpha.ID), e.Error)
	e = b.errorOf(http.MethodDelete, "/api/v1/groups/999", b.token, nil, http.StatusNotFound)
	require.Equal(t, "group 999 not found", e.Error)
	e = b.errorOf(http.MethodPut, "/api/v1/groups/999", b.token, map[string]any{"appname": "gamma"}, http.StatusNotFound)
	require.Equal(t, "group 999 not found", e.Error)

	// A change without a conflict still goes through: a new title, and
	// deleting the group no job uses.
	b.doJSON(http.MethodPut, alphaPath, b.token, map[string]any{"appname": "alpha", "title": "Alpha"}, http.StatusOK, nil)
	b.doJSON(http.MethodDelete, fmt.Sprintf("/api/v1/groups/%d", beta.ID), b.token, nil, http.StatusNoContent, nil)
}
