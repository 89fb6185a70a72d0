package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/cronix/cronix/cluster"
)

const (
	// nodeValidatePath is the node endpoint that runs a handler plugin's
	// own Validate (node.ValidatePath); %s is the escaped handler name.
	nodeValidatePath = "/handlers/%s/validate"
	// pluginValidateTimeout bounds the whole round trip to the node.
	pluginValidateTimeout = 3 * time.Second
	// maxValidateAnswer limits how much of a node's answer is read, and
	// maxValidateMessage how much of a plugin's message reaches the client.
	maxValidateAnswer  = 64 << 10
	maxValidateMessage = 1000
)

// checkParamsPlugin asks one live node of group offering handler (the pinned
// node when it is one of them, else the first in key order) to run the
// handler plugin's own Validate on params. It returns the message for
// fields["params"] ("<field>: <message>", or just the message when the
// plugin blames the params as a whole) when the plugin rejects them, and ""
// when it accepts them or could not be asked: no node token configured, no
// such node, node unreachable, timeout, or any answer but 200/422 (logged
// at warn). The schema check stands in that case; a save never waits on a
// node for longer than pluginValidateTimeout.
func (s *server) checkParamsPlugin(ctx context.Context, nodes []cluster.NodeInfo, pinned, group, handler string, params json.RawMessage) string {
	if s.nodeToken == "" {
		return ""
	}
	var target *cluster.NodeInfo
	for i := range nodes {
		n := &nodes[i]
		if n.Group != group || !n.HasHandler(handler) {
			continue
		}
		if target == nil || (pinned != "" && n.UUID == pinned) {
			target = n
		}
	}
	if target == nil {
		return ""
	}
	log := s.log.With(slog.String("handler", handler), slog.String("node", target.UUID), slog.String("address", target.Address()))
	ctx, cancel := context.WithTimeout(ctx, pluginValidateTimeout)
	defer cancel()
	u := target.BaseURL() + fmt.Sprintf(nodeValidatePath, url.PathEscape(handler))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(params))
	if err != nil {
		log.WarnContext(ctx, "plugin params validation skipped: bad node address", slog.Any("error", err))
		return ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.nodeToken)
	resp, err := s.validateClient.Do(req)
	if err != nil {
		log.WarnContext(ctx, "plugin params validation skipped: node unreachable", slog.Any("error", err))
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxValidateAnswer))
	if err != nil {
		log.WarnContext(ctx, "plugin params validation skipped: reading the node's answer", slog.Any("error", err))
		return ""
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return ""
	case http.StatusUnprocessableEntity:
		var ans struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(body, &ans); err != nil || ans.Message == "" {
			log.WarnContext(ctx, "plugin params validation skipped: undecodable rejection", slog.String("body", clipMessage(string(body))))
			return ""
		}
		msg := ans.Message
		if ans.Field != "" {
			msg = ans.Field + ": " + msg
		}
		return clipMessage(msg)
	default:
		log.WarnContext(ctx, "plugin params validation skipped: node answered an error",
			slog.Int("status", resp.StatusCode), slog.String("body", clipMessage(string(body))))
		return ""
	}
}

// clipMessage cuts s to maxValidateMessage bytes, on a rune boundary.
func clipMessage(s string) string {
	if len(s) <= maxValidateMessage {
		return s
	}
	cut := maxValidateMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
