package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/health"
)

// Readiness is the replica's /readyz checker: sql, etcd and leader, plus
// whatever the caller adds (standalone adds its node's checks).
func (s *Server) Readiness() *health.Checker { return s.ready }

// MetricsAddr is the bound address of the unauthenticated metrics
// listener, "" without one.
func (s *Server) MetricsAddr() string { return s.maddr }

func (s *Server) checkSQL(ctx context.Context) error {
	if s.store == nil {
		return errors.New("database not open")
	}
	return s.store.Ping(ctx)
}

func (s *Server) checkEtcd(ctx context.Context) error {
	if _, err := s.etcd.Get(ctx, s.cfg.Keys.NodePrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd unreachable: %w", err)
	}
	return nil
}

func (s *Server) checkLeader(context.Context) error {
	if s.raft == nil {
		return errors.New("raft not started")
	}
	if s.raft.LeaderID() == "" {
		return errors.New("no raft leader known (no quorum?)")
	}
	return nil
}

// checkTrigger fails on the raft leader until its trigger loop fires: while
// it claims the fence and loads jobs, cursors, nodes and runs (a second or
// two at 100,000 jobs), and while it is fenced or restarting after an
// error. Other replicas pass: the leader check covers them.
func (s *Server) checkTrigger(context.Context) error {
	if s.raft == nil || !s.raft.IsLeader() {
		return nil
	}
	if sched := s.sched.Load(); sched == nil || !sched.Firing() {
		return errors.New("this replica leads but its trigger loop is not firing yet " +
			"(loading jobs, or fenced or restarting after an error: see the log)")
	}
	return nil
}

// registerCollectors adds the families read at scrape time: raft state and
// nodes by status.
func (s *Server) registerCollectors() error {
	if err := s.cfg.Metrics.RegisterRaft(s.raft); err != nil {
		return fmt.Errorf("server: raft metrics: %w", err)
	}
	if err := s.cfg.Metrics.RegisterNodes(s.countNodes); err != nil {
		return fmt.Errorf("server: node metrics: %w", err)
	}
	return nil
}

// countNodes counts the registered nodes by status.
func (s *Server) countNodes(ctx context.Context) (map[string]int, error) {
	resp, err := s.etcd.Get(ctx, s.cfg.Keys.NodePrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	counts := map[string]int{}
	for _, kv := range resp.Kvs {
		var n cluster.NodeInfo
		if err := json.Unmarshal(kv.Value, &n); err != nil || n.Status == "" {
			counts["unknown"]++
			continue
		}
		counts[n.Status]++
	}
	return counts, nil
}

// serveMetrics starts the unauthenticated MetricsAddr listener.
func (s *Server) serveMetrics() error {
	l, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("server: metrics listen on %s: %w", s.cfg.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.cfg.Metrics.Handler())
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", s.ready.ReadyHandler())
	s.mhttp = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.maddr = l.Addr().String()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.mhttp.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	s.log.Info("metrics served", "addr", s.maddr)
	return nil
}
