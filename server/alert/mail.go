package alert

import (
	"context"
	"crypto/tls"
	"fmt"

	gomail "github.com/wneessen/go-mail"

	"github.com/cronix/cronix/server/store"
)

// sendMail sends one e-mail delivery through the configured SMTP server.
// The Message-ID is fixed per delivery, so a repeat of an attempt that was
// sent but not recorded (a crash in between) shows as the same message to
// clients that deduplicate by it.
func (s *Service) sendMail(ctx context.Context, set Settings, ev *store.AlertEvent, d store.AlertDelivery) error {
	if set.SMTP.Host == "" {
		return fmt.Errorf("SMTP is not configured (settings smtp.host)")
	}
	msg := gomail.NewMsg()
	if err := msg.From(set.SMTP.From); err != nil {
		return fmt.Errorf("%w: sender %q: %w", errPermanent, set.SMTP.From, err)
	}
	if err := msg.To(d.Recipients...); err != nil {
		return fmt.Errorf("%w: recipients: %w", errPermanent, err)
	}
	msg.Subject(subject(set.Language, ev))
	msg.SetMessageIDWithValue(fmt.Sprintf("cronix-alert-%d-%d@cronix", ev.ID, d.ID))
	msg.SetDate()
	msg.SetBodyString(gomail.TypeTextPlain, textBody(set.Language, ev))
	msg.AddAlternativeString(gomail.TypeTextHTML, htmlBody(set.Language, ev))

	client, err := s.mailClient(set.SMTP)
	if err != nil {
		return err
	}
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("sending mail through %s:%d: %w", set.SMTP.Host, set.SMTP.Port, err)
	}
	return nil
}

// mailClient builds a go-mail client for the SMTP settings.
func (s *Service) mailClient(c SMTP) (*gomail.Client, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.cfg.TLSConfig != nil {
		tlsConf = s.cfg.TLSConfig.Clone()
	}
	tlsConf.ServerName = c.Host
	opts := []gomail.Option{gomail.WithPort(c.Port), gomail.WithTimeout(s.cfg.SendTimeout), gomail.WithTLSConfig(tlsConf)}
	switch c.Security {
	case SecurityTLS:
		opts = append(opts, gomail.WithSSL())
	case SecurityNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if c.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(c.Username), gomail.WithPassword(c.Password))
	}
	client, err := gomail.NewClient(c.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: SMTP client for %s: %w", errPermanent, c.Host, err)
	}
	return client, nil
}
