package alert_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/alert"
)

// TestSMTPHostMustBeAHost: the SMTP host is dialled as given, so it must be
// a host name or an IP address: no port (smtp.port has it), no spaces,
// newlines or NUL characters.
func TestSMTPHostMustBeAHost(t *testing.T) {
	t.Parallel()
	valid := func(host string) alert.Settings {
		return alert.Settings{SMTP: alert.SMTP{Host: host, From: "cronix@example.com"}}
	}
	for _, host := range []string{"x", "mail.example.com", "mail.example.com.", "smtp_relay", "127.0.0.1", "::1",
		"fe80::1%eth0", "a-b.c-d.example"} {
		require.NoError(t, valid(host).Validate(), host)
	}
	for _, host := range []string{"mail example.com", "mail\nRCPT TO:<x@example.com>", "mail\x00", "mail.example.com:25",
		"[::1]", "-mail.example.com", "mail-.example.com", "a..b", ".", "http://mail.example.com", " "} {
		err := valid(host).Validate()
		var fe alert.FieldErrors
		require.ErrorAs(t, err, &fe, "%q", host)
		require.Equal(t, alert.FieldErrors{"smtp.host": "want a host name or an IP address (no port: that is smtp.port; no spaces)"},
			fe, "%q", host)
	}
	// No host and no sender: e-mail is off, nothing to check.
	require.NoError(t, alert.Settings{}.Validate())
}
