package schema_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	schema "github.com/cronix/cronix/sql"
)

func TestLoadEveryDialect(t *testing.T) {
	t.Parallel()
	var versions [][]int64
	for _, d := range []string{schema.SQLite, schema.Postgres, schema.MySQL} {
		migs, err := schema.Load(d)
		require.NoError(t, err, d)
		require.NotEmpty(t, migs, d)
		for i, m := range migs {
			require.NotEmpty(t, m.Statements, m.Name)
			if i > 0 {
				require.Greater(t, m.Version, migs[i-1].Version, m.Name)
			}
			for _, s := range m.Statements {
				if strings.HasPrefix(s, "CREATE TRIGGER") || strings.HasPrefix(s, "CREATE OR REPLACE FUNCTION") {
					// A trigger's or a function's body ends its statements
					// with ";": one line each, the body ending with "END".
					require.NotContains(t, s, "\n", "%s/%s: a body on one line", d, m.Name)
					require.Regexp(t, `END( \$\$)?$|EXECUTE FUNCTION \w+\(\)$`, s, "%s/%s", d, m.Name)
					continue
				}
				require.NotContains(t, s, ";", "%s/%s: one statement per chunk", d, m.Name)
			}
		}
		var v []int64
		for _, m := range migs {
			v = append(v, m.Version)
		}
		versions = append(versions, v)
	}
	// Every dialect carries the same migration versions.
	require.Equal(t, versions[0], versions[1])
	require.Equal(t, versions[0], versions[2])
}

func TestUnknownDialect(t *testing.T) {
	t.Parallel()
	_, err := schema.Migrations("oracle")
	require.Error(t, err)
	_, err = schema.Load("oracle")
	require.Error(t, err)
}

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	got := schema.SplitStatements("-- comment\nCREATE TABLE a (\n  x INT\n);\n\n  -- more\nCREATE INDEX i ON a (x);\nSELECT 1")
	require.Equal(t, []string{"CREATE TABLE a (\n  x INT\n)", "CREATE INDEX i ON a (x)", "SELECT 1"}, got)
}
