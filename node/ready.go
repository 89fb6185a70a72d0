package node

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/health"
)

// AddReadyChecks adds the node's readiness checks to c: node_registered
// (its registration is in etcd) and plugins_published (every loaded
// handler's description is in etcd). Standalone adds them to the server's
// /readyz.
func (n *Node) AddReadyChecks(c *health.Checker) {
	c.Add("node_registered", n.checkRegistered)
	c.Add("plugins_published", n.checkPublished)
}

// Ready runs the node's readiness checks (those of its /readyz).
func (n *Node) Ready(ctx context.Context) health.Report { return n.ready.Check(ctx) }

func (n *Node) checkEtcd(ctx context.Context) error {
	if _, err := n.etcd.Get(ctx, n.cfg.Keys.Node(n.uuid), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd unreachable: %w", err)
	}
	return nil
}

func (n *Node) checkRegistered(ctx context.Context) error {
	resp, err := n.etcd.Get(ctx, n.cfg.Keys.Node(n.uuid), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("reading the registration: %w", err)
	}
	if resp.Count == 0 {
		return fmt.Errorf("node %s is not registered in etcd", n.uuid)
	}
	return nil
}

func (n *Node) checkPublished(ctx context.Context) error {
	if n.host == nil {
		return errors.New("plugins not started")
	}
	infos := n.host.Infos()
	if len(infos) == 0 {
		return errors.New("no handler plugin is loaded")
	}
	ops := make([]clientv3.Op, len(infos))
	for i, info := range infos {
		ops[i] = clientv3.OpGet(n.cfg.Keys.Handler(info.Name, n.uuid), clientv3.WithCountOnly())
	}
	resp, err := n.etcd.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("reading the published handlers: %w", err)
	}
	var missing []string
	for i, r := range resp.Responses {
		if r.GetResponseRange().GetCount() == 0 {
			missing = append(missing, infos[i].Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("handlers not published yet: %s", strings.Join(missing, ", "))
	}
	return nil
}

// serveMetrics starts the unauthenticated MetricsAddr listener.
func (n *Node) serveMetrics() error {
	l, err := net.Listen("tcp", n.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("node: metrics listen on %s: %w", n.cfg.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", n.cfg.Metrics.Handler())
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", n.ready.ReadyHandler())
	n.mhttp = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.mhttp.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	n.maddr = l.Addr().String()
	n.log.Info("metrics served", "addr", n.maddr)
	return nil
}

// MetricsAddr is the address the unauthenticated metrics listener is
// bound to, "" without one.
func (n *Node) MetricsAddr() string { return n.maddr }

// requireToken serves next only to "Authorization: Bearer <token>".
func requireToken(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			writeError(w, http.StatusUnauthorized, "missing or invalid node token")
			return
		}
		next.ServeHTTP(w, r)
	})
}
