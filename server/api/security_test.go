package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

// A security event a node reports is listed for admins only and raises a
// `security` alert.
func TestSecurityEventsRaiseAlertsForAdmins(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b.doJSON(http.MethodPost, "/api/v1/internal/security-events", nodeToken, cluster.SecurityEventBatch{
		Node: "n7", Events: []cluster.SecurityEvent{{At: at, Kind: "bad_signature", Key: "/Cronix/run/n7/3-1",
			Reason: "record signature does not verify"}},
	}, http.StatusOK, nil)

	b.errorOf(http.MethodGet, "/api/v1/security/events", b.userToken, nil, http.StatusForbidden)
	var events api.List[api.SecurityEvent]
	b.doJSON(http.MethodGet, "/api/v1/security/events", b.token, nil, http.StatusOK, &events)
	require.Equal(t, 1, events.Total)
	require.Equal(t, "n7", events.Items[0].Node)
	require.Equal(t, "bad_signature", events.Items[0].Kind)

	alerts, total, err := b.svc.FindEvents(t.Context(), store.AlertEventFilter{Kind: alert.KindSecurity},
		store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Equal(t, "n7", alerts[0].Node)
	require.Contains(t, alerts[0].Message, "/Cronix/run/n7/3-1")
}
