package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/trust"
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

// TestSecurityEventKindsAndTimes: a node's batch is stored only with the
// kinds a node reports (node/trust's), else it is refused whole with a 400
// on events[i].kind; and the list writes `at` as every instant of the API
// (UTC, milliseconds).
func TestSecurityEventKindsAndTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("X", 3600))
	var events []cluster.SecurityEvent
	for i, kind := range []string{trust.KindUnsigned, trust.KindBadSignature, trust.KindStaleTerm, trust.KindMalformed} {
		events = append(events, cluster.SecurityEvent{At: at, Kind: kind, Key: fmt.Sprintf("/Cronix/run/n1/%d-1", i), Reason: "r"})
	}
	for _, kind := range []string{"bogus", api.KindForeignResult, "Bad_Signature"} {
		bad := append(append([]cluster.SecurityEvent(nil), events...), cluster.SecurityEvent{At: at, Kind: kind, Key: "/k"})
		e := b.errorOf(http.MethodPost, "/api/v1/internal/security-events", nodeToken,
			cluster.SecurityEventBatch{Node: "n1", Events: bad}, http.StatusBadRequest)
		require.Equal(t, map[string]string{"events[4].kind": fmt.Sprintf(
			"unknown kind %q (one of unsigned_record, bad_signature, stale_term, malformed_record)", kind)}, e.Fields)
	}
	status, raw := b.do(http.MethodGet, "/api/v1/security/events", b.token, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(raw), `"total":0`, "a refused batch stores nothing")

	b.doJSON(http.MethodPost, "/api/v1/internal/security-events", nodeToken,
		cluster.SecurityEventBatch{Node: "n1", Events: events}, http.StatusOK, nil)
	status, raw = b.do(http.MethodGet, "/api/v1/security/events", b.token, nil)
	require.Equal(t, http.StatusOK, status)
	var list struct {
		Items []map[string]any `json:"items"`
	}
	require.NoError(t, json.Unmarshal(raw, &list))
	require.Len(t, list.Items, 4)
	for _, ev := range list.Items {
		require.Equal(t, "2026-03-01T11:00:00.123Z", ev["at"], "%s", raw)
	}
}
