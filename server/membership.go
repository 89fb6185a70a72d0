package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/raftha"
)

// statusInterval is how often a non-voter reports its raft progress, and
// how often the leader's promoter checks the reports.
const statusInterval = time.Second

// reportProgress writes this replica's raft progress into the server
// registry while it is a non-voter (or not in the configuration yet), so
// the leader can promote it once it has caught up. Voters write nothing:
// the registry stays quiet for the nodes that watch it.
func (s *Server) reportProgress(runCtx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	key := cluster.ServerStatus(s.listener.Addr().String())
	wrote := false
	for {
		select {
		case <-runCtx.Done():
			return
		case <-t.C:
		}
		st, err := s.raft.Status()
		if err != nil {
			continue
		}
		voter := false
		for _, m := range st.Servers {
			voter = voter || (m.ID == st.ID && m.Suffrage == "Voter")
		}
		ctx, cancel := context.WithTimeout(runCtx, statusInterval)
		switch {
		case voter && wrote:
			if _, err := s.etcd.Delete(ctx, key); err == nil {
				wrote = false
			}
		case !voter:
			v, _ := json.Marshal(cluster.ServerRaftStatus{ID: s.cfg.ID, AppliedIndex: st.AppliedIndex,
				LastContactMs: st.LastContact.Milliseconds(), Updated: time.Now().UTC()})
			s.leaseMu.Lock()
			lease := s.lease
			s.leaseMu.Unlock()
			if _, err := s.etcd.Put(ctx, key, string(v), clientv3.WithLease(lease)); err != nil {
				s.log.Warn("reporting raft progress failed", "err", err)
			} else {
				wrote = true
			}
		}
		cancel()
	}
}

// registryProgress reads the non-voters' progress reports from etcd.
type registryProgress struct {
	etcd *clientv3.Client
}

var _ raftha.ProgressSource = registryProgress{}

// Progress implements raftha.ProgressSource.
func (r registryProgress) Progress(ctx context.Context) (map[string]raftha.Progress, error) {
	resp, err := r.etcd.Get(ctx, cluster.RegistryRoot, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read raft progress reports: %w", err)
	}
	out := map[string]raftha.Progress{}
	for _, kv := range resp.Kvs {
		if cluster.LastSegment(string(kv.Key)) != "status" {
			continue
		}
		var st cluster.ServerRaftStatus
		if json.Unmarshal(kv.Value, &st) != nil || st.ID == "" {
			continue
		}
		out[st.ID] = raftha.Progress{AppliedIndex: st.AppliedIndex,
			LastContact: time.Duration(st.LastContactMs) * time.Millisecond, Updated: st.Updated}
	}
	return out, nil
}
