package pluginapi_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sdkPath = "github.com/cronix/cronix/pluginapi"

// TestImportsNothingFromCronix enforces that the SDK stays its own product:
// pluginapi and its subpackages (tests included) may import only the
// standard library, third-party modules and pluginapi's own packages, never
// server/, node/ or any other Cronix package.
func TestImportsNothingFromCronix(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-test", sdkPath+"/...").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Contains(t, deps, sdkPath, "go list output looks wrong")
	require.Empty(t, foreignCronixDeps(deps), "the SDK must not import other Cronix packages")
}

// TestForeignCronixDeps shows the check above can fail.
func TestForeignCronixDeps(t *testing.T) {
	t.Parallel()
	got := foreignCronixDeps([]string{
		"fmt",
		"github.com/hashicorp/go-plugin",
		sdkPath,
		sdkPath + "/internal/wire",
		sdkPath + "_test [" + sdkPath + ".test]",
		sdkPath + ".test",
		"github.com/cronix/cronix/server/store",
		"github.com/cronix/cronix/node/pluginhost [" + sdkPath + ".test]",
		"github.com/cronix/cronix/cluster",
		"github.com/cronix/cronixother/x",
	})
	require.Equal(t, []string{
		"github.com/cronix/cronix/server/store",
		"github.com/cronix/cronix/node/pluginhost",
		"github.com/cronix/cronix/cluster",
	}, got)
}

// foreignCronixDeps returns the Cronix packages outside pluginapi among
// `go list -deps -test` lines.
func foreignCronixDeps(lines []string) []string {
	var foreign []string
	for _, line := range lines {
		pkg, _, _ := strings.Cut(strings.TrimSpace(line), " ") // drop " [x.test]"
		pkg = strings.TrimSuffix(strings.TrimSuffix(pkg, ".test"), "_test")
		if pkg != "github.com/cronix/cronix" && !strings.HasPrefix(pkg, "github.com/cronix/cronix/") {
			continue
		}
		if pkg == sdkPath || strings.HasPrefix(pkg, sdkPath+"/") {
			continue
		}
		foreign = append(foreign, pkg)
	}
	return foreign
}
