package compat_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

// pageSpy records the pages the compat API asks the store for.
type pageSpy struct {
	api.Store
	mu    sync.Mutex
	pages []store.Page
}

func (s *pageSpy) record(p store.Page) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages = append(s.pages, p)
}

func (s *pageSpy) FindJobs(ctx context.Context, f store.JobFilter, p store.Page) ([]store.Job, int, error) {
	s.record(p)
	return s.Store.FindJobs(ctx, f, p)
}

func (s *pageSpy) FindGroups(ctx context.Context, f store.GroupFilter, p store.Page) ([]store.Group, int, error) {
	s.record(p)
	return s.Store.FindGroups(ctx, f, p)
}

// TestStartLengthPaging: xxl-job's start/length return exactly the rows
// [start, start+length) and the total, whether or not start is a multiple
// of length, and a start past the end an empty page; the store is never
// asked for more than api.MaxPageSize rows (nor for every row).
func TestStartLengthPaging(t *testing.T) {
	t.Parallel()
	spy := &pageSpy{}
	b := setupWith(t, func(s api.Store) api.Store { spy.Store = s; return spy })
	const n = 7
	var jobs []float64 // ids in list order
	for i := range n {
		jobs = append(jobs, float64(b.storeJob("xxl-job-executor-sample-springCloud", fmt.Sprintf("job-%d", i)).ID))
	}
	for i := range n - 2 { // 7 groups with the 2 of setup, listed by appname
		require.NoError(t, b.store.CreateGroup(b.ctx, &store.Group{AppName: fmt.Sprintf("zz-group-%d", i)}))
	}
	_, out := b.send(http.MethodGet, "/jobgroup/list?pageSize=100", nil, false, "xxl")
	var groups []float64
	for _, g := range out["data"].([]any) {
		groups = append(groups, g.(map[string]any)["id"].(float64))
	}
	require.Len(t, groups, n)

	ids := func(out map[string]any) []float64 {
		got := []float64{}
		for _, r := range out["data"].([]any) {
			got = append(got, r.(map[string]any)["id"].(float64))
		}
		return got
	}
	for _, path := range []string{"/jobinfo/list", "/jobgroup/list"} {
		all := map[string][]float64{"/jobinfo/list": jobs, "/jobgroup/list": groups}[path]
		for _, length := range []int{1, 2, 3, 4, n, 500} {
			for start := 0; start <= n+1; start++ {
				q := fmt.Sprintf("%s?start=%d&length=%d", path, start, length)
				status, out := b.send(http.MethodGet, q, nil, false, "xxl")
				require.Equal(t, http.StatusOK, status, "%s: %v", q, out)
				want := all[min(start, n):min(start+length, n)]
				require.Equal(t, append([]float64{}, want...), ids(out), q)
				require.EqualValues(t, n, out["recordsTotal"], q)
				require.EqualValues(t, n, out["recordsFiltered"], q)
			}
		}
		for _, start := range []int{999_999_999, api.MaxPage} {
			q := fmt.Sprintf("%s?start=%d&length=500", path, start)
			status, out := b.send(http.MethodPost, q, nil, false, "xxl")
			require.Equal(t, http.StatusOK, status, "%s: %v", q, out)
			require.Equal(t, map[string]any{"recordsFiltered": float64(n), "recordsTotal": float64(n), "data": []any{}}, out, q)
		}
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	require.NotEmpty(t, spy.pages)
	for _, p := range spy.pages {
		require.True(t, p.PageSize >= 1 && p.PageSize <= api.MaxPageSize, "the store was asked for %+v (of %v)", p, spy.pages)
	}
}
