package raftha

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/cronix/cronix/internal/hclogslog"
)

// keyCurrentTerm is where hashicorp/raft keeps its current term in the
// stable store.
var keyCurrentTerm = []byte("CurrentTerm")

// RecoverConfig configures Recover.
type RecoverConfig struct {
	// Dir is the (stopped) replica's raft directory.
	Dir string
	// Peers is the new configuration, "id=host:port" each: the surviving
	// replicas, the one being recovered included. All become voters.
	Peers []string
	// MinTerm, when above the stored term, raises the stored current term
	// to it, so the first election after recovery wins a term above every
	// term a lost replica may have used (the leader fence in etcd refuses
	// a term that is not higher than the last claim).
	MinTerm uint64
	// Logger receives raft's logs; nil discards them.
	Logger *slog.Logger
}

// Recover rewrites the raft configuration of a stopped replica to Peers
// (hashicorp/raft RecoverCluster): for a cluster that lost its quorum for
// good, run it on every survivor with the same Peers while all replicas
// are stopped, then start the survivors. The FSM state and the log are
// kept. It returns the current term now stored.
func Recover(cfg RecoverConfig) (uint64, error) {
	if cfg.Dir == "" || len(cfg.Peers) == 0 {
		return 0, errors.New("raftha: recover needs the raft directory and at least one peer")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var conf raft.Configuration
	seen := map[string]bool{}
	for _, p := range cfg.Peers {
		id, addr, err := parsePeer(p)
		if err != nil {
			return 0, err
		}
		if seen[id] {
			return 0, fmt.Errorf("raft: peer id %q listed twice", id)
		}
		seen[id] = true
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	hl := hclogslog.New(cfg.Logger, "raft")
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")})
	if err != nil {
		return 0, fmt.Errorf("raftha: open log store in %s (is the replica stopped?): %w", cfg.Dir, err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hl.Named("snapshot"))
	if err != nil {
		return 0, fmt.Errorf("raftha: open snapshot store in %s: %w", cfg.Dir, err)
	}
	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return 0, fmt.Errorf("raftha: read existing state: %w", err)
	}
	if !existing {
		return 0, fmt.Errorf("raftha: %s holds no raft state to recover", cfg.Dir)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = conf.Servers[0].ID
	rc.Logger = hl
	_, trans := raft.NewInmemTransport("")
	if err := raft.RecoverCluster(rc, newFSM(), store, store, snaps, trans, conf); err != nil {
		return 0, fmt.Errorf("raftha: recover cluster: %w", err)
	}
	term, err := store.GetUint64(keyCurrentTerm)
	if err != nil {
		return 0, fmt.Errorf("raftha: read current term: %w", err)
	}
	if cfg.MinTerm > term {
		if err := store.SetUint64(keyCurrentTerm, cfg.MinTerm); err != nil {
			return 0, fmt.Errorf("raftha: raise current term to %d: %w", cfg.MinTerm, err)
		}
		term = cfg.MinTerm
	}
	return term, nil
}
