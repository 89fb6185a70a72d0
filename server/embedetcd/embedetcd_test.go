package embedetcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

func TestPutGet(t *testing.T) {
	t.Parallel()
	c := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Put(ctx, "/Cronix/x", "1")
	require.NoError(t, err)
	resp, err := c.Get(ctx, "/Cronix/x")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "1", string(resp.Kvs[0].Value))
}
