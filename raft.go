package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/raftha"
)

// raftRecoverConfig configures "cronix raft recover".
type raftRecoverConfig struct {
	commonConfig
	etcdClientConfig
	// DataDir is the stopped replica's data dir (its raft state).
	DataDir string `flag:"data-dir" env:"CRONIX_DATA_DIR" yaml:"data_dir" help:"the stopped replica's data dir (raft.db and snapshots/)"`
	// Peers is the new raft configuration: the survivors.
	Peers []string `flag:"peers" env:"CRONIX_RAFT_RECOVER_PEERS" yaml:"peers" help:"comma-separated id=host:port of every surviving replica, this one included: the new set of voters (the same list on every survivor)"`
	// MinTerm, when set, replaces reading the leader fence from etcd.
	MinTerm int64 `flag:"min-term" env:"CRONIX_RAFT_RECOVER_MIN_TERM" yaml:"min_term" help:"raise the stored raft term to at least this instead of reading the leader fence from etcd, which is then not contacted (for a recovery while etcd is unreachable: give the fence's term from 'etcdctl get /Cronix/leader' or from the replica's 'fenced by a newer term' log line; 1 keeps the stored term); 0 reads the fence from etcd"`
}

func defaultRaftRecover() raftRecoverConfig {
	return raftRecoverConfig{commonConfig: defaultCommon(), etcdClientConfig: defaultEtcdClient(), DataDir: "./data"}
}

const raftRecoverSummary = "Rewrites the raft membership of a STOPPED replica to the surviving replicas (hashicorp/raft RecoverCluster), for a cluster that lost its quorum for good; run it on every survivor with the same --peers, then start them. Reads the leader fence in etcd (or takes --min-term, without etcd) so the recovered leader's term is above it. etcd and the database are kept as they are."

func runRaft(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "recover" {
		return errors.New("usage: cronix raft recover --data-dir DIR --peers id=host:port,... (see --help)")
	}
	cfg := defaultRaftRecover()
	log, err := loadConfig(&cfg, &cfg.commonConfig, "raft recover", raftRecoverSummary, args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	if len(cfg.Peers) == 0 {
		return errors.New("--peers is required: id=host:port of every surviving replica")
	}
	for i, p := range cfg.Peers {
		cfg.Peers[i] = strings.TrimSpace(p)
	}
	var fence uint64
	switch {
	case cfg.MinTerm < 0:
		return fmt.Errorf("--min-term %d: must be 0 (read the fence from etcd) or a term", cfg.MinTerm)
	case cfg.MinTerm > 0:
		fence = uint64(cfg.MinTerm) // the operator's; etcd is not needed
	default:
		if fence, err = fenceTerm(ctx, cfg); err != nil {
			return err
		}
	}
	term, err := raftha.Recover(raftha.RecoverConfig{Dir: cfg.DataDir, Peers: cfg.Peers, MinTerm: fence, Logger: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "raft configuration of %s is now %s (term %d, leader fence term %d); start the survivors\n",
		cfg.DataDir, strings.Join(cfg.Peers, ","), term, fence)
	return nil
}

// fenceTerm reads the term of the last leader fence claim in etcd (0 when
// none): the recovered replicas must elect a leader above it.
func fenceTerm(ctx context.Context, cfg raftRecoverConfig) (uint64, error) {
	cli, err := etcdClient(cfg.etcdClientConfig, nil)
	if err != nil {
		return 0, fmt.Errorf("reading the leader fence (or pass --min-term): %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	key := cluster.NewKeys(cfg.EtcdRoot).Leader()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("reading the leader fence %s from etcd (etcd must be reachable, or pass --min-term with the fence's term): %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	term, _, err := cluster.ParseLeaderValue(string(resp.Kvs[0].Value))
	if err != nil {
		return 0, fmt.Errorf("leader fence %s: %w", key, err)
	}
	return term, nil
}
