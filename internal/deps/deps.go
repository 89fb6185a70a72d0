//go:build deps

// Package deps pins modules while the code that uses them is being written.
package deps

import (
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/google/uuid"
	_ "github.com/gorilla/mux"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/hashicorp/go-plugin"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/robfig/cron/v3"
	_ "github.com/stretchr/testify/require"
	_ "github.com/uptrace/bun"
	_ "github.com/uptrace/bun/dialect/mysqldialect"
	_ "github.com/uptrace/bun/dialect/pgdialect"
	_ "github.com/uptrace/bun/dialect/sqlitedialect"
	_ "github.com/uptrace/bun/driver/pgdriver"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "golang.org/x/crypto/bcrypt"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"

	_ "github.com/shirou/gopsutil/v4/cpu"
)
